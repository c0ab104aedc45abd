"""Programs for the oracle tests, each with an independent hand-written numpy evaluator.

Every case carries the program text the tool parses and a plain numpy function,
written by hand, that computes the same output from the same inputs. The tests
differentiate that numpy function by central finite differences: nothing here
goes through the tool's parser, its interpreter, torch autograd or sympy.

Input values are given as (value text for the tool, numpy array it must denote);
the tests also check that the tool built exactly those inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

Env = dict[str, np.ndarray]


def lit(x: object) -> tuple[str, np.ndarray]:
    """A literal value: its text (nested lists, exact float reprs) and the array."""
    a = np.asarray(x, dtype=np.float64)
    return fmt(a), a


def fmt(a: np.ndarray) -> str:
    """Nested-list text of an array; floats printed with repr, so they round-trip exactly."""
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 0:
        return repr(float(a))
    if a.ndim == 1:
        return "[" + ",".join(repr(float(v)) for v in a) + "]"
    return "[" + ",".join(fmt(r) for r in a) + "]"


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))


def pnorm(x: np.ndarray, p: float = 2.0, axis: int | tuple[int, ...] | None = None, keepdims: bool = False):
    return np.sum(np.abs(x) ** p, axis=axis, keepdims=keepdims) ** (1.0 / p)


@dataclass
class Case:
    """One program, its inputs, and the independent evaluator of its output."""

    id: str
    program: str
    values: dict[str, tuple[str, np.ndarray]]
    fn: Callable[[Env], np.ndarray]
    consts: dict[str, tuple[str, np.ndarray]] = field(default_factory=dict)
    output: str | None = None
    seed: int | None = None
    zero_grads: tuple[str, ...] = ()  # leaves the output must not depend on
    # fn takes (env, frozen): `frozen` holds the inputs at the evaluation point, for detach()/.data,
    # whose values are constants of the graph (finite differences must not move them)
    frozen: bool = False
    # hand-derived closed forms: (env, v) -> {leaf: grad} and env -> {leaf: Jacobian}
    closed_grads: Callable[[Env, np.ndarray], dict[str, np.ndarray]] | None = None
    closed_jac: Callable[[Env], dict[str, np.ndarray]] | None = None


# ----------------------------------------------------------------------------- values
A3 = lit([0.7, -1.3, 2.1])
B3 = lit([1.5, 0.4, -0.8])
POS3 = lit([0.6, 1.7, 2.9])
POS3B = lit([1.2, 0.35, 2.2])
M23 = lit([[0.5, -1.2, 0.9], [1.4, 0.3, -0.7]])
M23B = lit([[-0.6, 0.8, 1.1], [0.2, -1.5, 0.45]])
M32 = lit([[0.3, -0.9], [1.1, 0.6], [-0.4, 1.3]])
M22 = lit([[1.2, -0.5], [0.7, 2.0]])
X2 = lit([0.8, -0.35])
T223 = lit([[[0.2, -0.4, 1.0], [0.9, 0.1, -1.1]], [[-0.7, 0.5, 0.3], [1.3, -0.2, 0.6]]])
T234 = lit(np.round(np.linspace(-1.2, 1.3, 24).reshape(2, 3, 4) + 0.05 * np.sin(np.arange(24)).reshape(2, 3, 4), 4))
W34 = lit([[0.2, -0.5, 0.3, 0.8], [-0.7, 0.1, 0.6, -0.2], [0.4, 0.9, -0.3, 0.05]])
X4 = lit([0.5, -1.0, 0.25, 1.5])
B3W = lit([0.1, -0.2, 0.3])


def _torch_randn(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """What the documented seeding gives for one `randn` input: torch.Generator().manual_seed(seed)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float64).numpy()


def _torch_random_sequence(specs: list[tuple[str, tuple[int, ...]]], seed: int) -> list[np.ndarray]:
    """Several rand/randn inputs drawn from one generator, in program order (the documented seeding)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    fns = {"rand": torch.rand, "randn": torch.randn}
    return [fns[kind](shape, generator=g, dtype=torch.float64).numpy() for kind, shape in specs]


_RAND2 = _torch_random_sequence([("randn", (3,)), ("rand", (2, 3))], 11)


def _unary_cases() -> list[Case]:
    mixed = lit([0.7, -1.3, 0.45, -0.2])  # away from 0 (relu/abs kinks) and from tan's poles
    pos = lit([0.3, 1.1, 2.5, 0.8])
    table: list[tuple[str, str, Callable[[np.ndarray], np.ndarray], tuple[str, np.ndarray]]] = [
        ("log", "log(x)", np.log, pos),
        ("exp", "torch.exp(x)", np.exp, mixed),
        ("sin", "x.sin()", np.sin, mixed),
        ("cos", "cos(x)", np.cos, mixed),
        ("tan", "torch.tan(x)", np.tan, mixed),
        ("tanh", "x.tanh()", np.tanh, mixed),
        ("sigmoid", "sigmoid(x)", sigmoid, mixed),
        ("relu", "relu(x) * x", lambda x: np.maximum(x, 0.0) * x, mixed),
        ("sqrt", "x.sqrt()", np.sqrt, pos),
        ("abs", "torch.abs(x) * x", lambda x: np.abs(x) * x, mixed),
        ("neg", "-x * 2", lambda x: -x * 2, mixed),
    ]
    return [Case(f"unary_{name}", prog, {"x": val}, lambda e, f=f: f(e["x"])) for name, prog, f, val in table]


# ----------------------------------------------------------------------------- closed forms
def _seed_grads(e: Env, v: np.ndarray) -> dict[str, np.ndarray]:
    return {"a": 3 * v, "b": 4 * e["b"] * v, "c": v / e["c"]}


def _seed_jac(e: Env) -> dict[str, np.ndarray]:
    return {"a": 3 * np.eye(3), "b": np.diag(4 * e["b"]), "c": np.diag(1 / e["c"])}


def _softmax_jac(e: Env) -> dict[str, np.ndarray]:
    s = softmax(e["x"], 0)
    return {"x": np.diag(s) - np.outer(s, s)}


def _log_softmax_jac(e: Env) -> dict[str, np.ndarray]:
    s = softmax(e["x"], 0)
    return {"x": np.eye(len(s)) - np.outer(np.ones_like(s), s)}


def _tanh_layer_jac(e: Env) -> dict[str, np.ndarray]:
    W, x, b = e["W"], e["x"], e["b"]
    t = np.tanh(W @ x + b)
    d = 1 - t * t
    jW = np.zeros((3, 3, 4))
    for i in range(3):
        jW[i, i, :] = d[i] * x
    return {"x": d[:, None] * W, "b": np.diag(d), "W": jW}


def _tanh_layer_const_jac(e: Env) -> dict[str, np.ndarray]:
    j = _tanh_layer_jac(e)
    return {"x": j["x"], "b": j["b"]}


def _matmul_grads(e: Env, v: np.ndarray) -> dict[str, np.ndarray]:
    return {"A": v @ e["B"].T, "B": e["A"].T @ v}


def _norm_grads(e: Env, v: np.ndarray) -> dict[str, np.ndarray]:
    x = e["x"]
    return {"x": v * x / np.sqrt(np.sum(x * x))}


def _prod_grads(e: Env, v: np.ndarray) -> dict[str, np.ndarray]:
    x = e["x"]
    return {"x": v * np.prod(x) / x}


def _while_grads(e: Env, v: np.ndarray) -> dict[str, np.ndarray]:
    x = e["x"]
    k = 2.0
    while np.sqrt(np.sum((x * k) ** 2)) < 1000:
        k *= 2
    return {"x": k * v}


def _while_fn(e: Env, z: Env) -> np.ndarray:
    # the loop count is decided by y.data (a constant of the graph) at the evaluation point
    return _while_grads(z, np.ones(1))["x"] * e["x"]


def _if_fn(e: Env) -> np.ndarray:
    x = e["x"]
    return x * x if np.sum(x) > 0 else -3 * x


def _aug_fn(e: Env) -> np.ndarray:
    a, b, c = e["a"], e["b"], e["c"]
    y = a * 1
    y = y + b * b
    y = y * a
    y = y - c
    y = y / 2
    y = y**2
    return y


# ----------------------------------------------------------------------------- the table
SEED_VALUES = {"a": lit([1, 2, 3]), "b": lit([3, 4, 5]), "c": lit([6, 7, 8])}

CASES: list[Case] = [
    # elementwise chains
    Case(
        "seed_formula",
        "3*a+2*b*b+log(c)",
        SEED_VALUES,
        lambda e: 3 * e["a"] + 2 * e["b"] * e["b"] + np.log(e["c"]),
        closed_grads=_seed_grads,
        closed_jac=_seed_jac,
    ),
    Case(
        "seed_formula_torch_log_scalars",
        "3*a + 2*b*b + torch.log(c)",
        {"a": lit(0.1), "b": lit(1.0), "c": lit(0.1)},
        lambda e: 3 * e["a"] + 2 * e["b"] * e["b"] + np.log(e["c"]),
        closed_grads=_seed_grads,
    ),
    Case(
        "elementwise_chain",
        "sin(a) * exp(b) - tanh(a * b) + sigmoid(a - b) / 3",
        {"a": A3, "b": B3},
        lambda e: np.sin(e["a"]) * np.exp(e["b"]) - np.tanh(e["a"] * e["b"]) + sigmoid(e["a"] - e["b"]) / 3,
    ),
    *_unary_cases(),
    # pow
    Case(
        "pow_number_exponent",
        "a**3 + pow(p, 2.5) + p**-1",
        {"a": A3, "p": POS3},
        lambda e: e["a"] ** 3 + e["p"] ** 2.5 + e["p"] ** -1.0,
    ),
    Case("pow_tensor_exponent", "p ** b", {"p": POS3, "b": B3}, lambda e: e["p"] ** e["b"]),
    Case(
        "pow_method_and_torch",
        "p.pow(b) + torch.pow(q, 0.5)",
        {"p": POS3, "b": B3, "q": POS3B},
        lambda e: e["p"] ** e["b"] + e["q"] ** 0.5,
    ),
    Case("pow_number_base", "2 ** a", {"a": A3}, lambda e: 2.0 ** e["a"]),
    # division
    Case(
        "division",
        "a / b + 1 / p - b / (a * a + 1)",
        {"a": A3, "b": B3, "p": POS3},
        lambda e: e["a"] / e["b"] + 1 / e["p"] - e["b"] / (e["a"] * e["a"] + 1),
    ),
    # broadcasting
    Case(
        "broadcast_row_times_column",
        "r * col",
        {"r": lit([[1.0, 2.0, -0.5]]), "col": lit([[0.3], [-1.2]])},
        lambda e: e["r"] * e["col"],
    ),
    Case("broadcast_scalar_times_matrix", "s * M + s", {"s": lit(2.5), "M": M22}, lambda e: e["s"] * e["M"] + e["s"]),
    Case("broadcast_matrix_plus_vector", "(c + a) * a", {"c": M23, "a": A3}, lambda e: (e["c"] + e["a"]) * e["a"]),
    # matmul
    Case("matmul_matrix_vector", "M @ x", {"M": M23, "x": A3}, lambda e: e["M"] @ e["x"]),
    Case("matmul_vector_matrix", "x @ M", {"x": X2, "M": M23}, lambda e: e["x"] @ e["M"]),
    Case("matmul_matrix_matrix", "A @ B", {"A": M23, "B": M32}, lambda e: e["A"] @ e["B"], closed_grads=_matmul_grads),
    Case(
        "matmul_functions",
        "matmul(A, B) + torch.mm(A, B) - A.matmul(B) * 0.5",
        {"A": M23, "B": M32},
        lambda e: 1.5 * (e["A"] @ e["B"]),
    ),
    Case("matmul_vector_vector", "a @ b", {"a": A3, "b": B3}, lambda e: e["a"] @ e["b"]),
    Case("matmul_batched_3d_2d", "X @ B", {"X": T223, "B": M32}, lambda e: e["X"] @ e["B"]),
    Case(
        "tanh_layer_W_leaf",
        "h = tanh(W @ x + b)",
        {"W": W34, "x": X4, "b": B3W},
        lambda e: np.tanh(e["W"] @ e["x"] + e["b"]),
        closed_jac=_tanh_layer_jac,
    ),
    Case(
        "tanh_layer_W_const",
        "h = tanh(W @ x + b)",
        {"x": X4, "b": B3W},
        lambda e: np.tanh(e["W"] @ e["x"] + e["b"]),
        consts={"W": W34},
        closed_jac=_tanh_layer_const_jac,
    ),
    # transpose
    Case("transpose_T_matmul", "A.T @ B", {"A": M23, "B": M23B}, lambda e: e["A"].T @ e["B"]),
    Case(
        "transpose_functions",
        "transpose(A, 0, 1) * C + A.t() + torch.t(A) * 2",
        {"A": M23, "C": M32},
        lambda e: e["A"].T * e["C"] + 3 * e["A"].T,
    ),
    Case(
        "transpose_3d",
        "transpose(X, 0, 2) * transpose(X, -1, 0)",
        {"X": T223},
        lambda e: np.transpose(e["X"], (2, 1, 0)) ** 2,
    ),
    Case("transpose_direct_output", "A.T", {"A": M23}, lambda e: e["A"].T),
    Case("transpose_3d_direct_output", "transpose(X, 0, 2)", {"X": T223}, lambda e: np.transpose(e["X"], (2, 1, 0))),
    # reductions
    Case("sum_dim_direct_output", "c.sum(dim=1)", {"c": M23}, lambda e: np.sum(e["c"], axis=1)),
    Case(
        "sum_dim0_keepdim_direct_output",
        "torch.sum(c, dim=0, keepdim=True)",
        {"c": M23},
        lambda e: np.sum(e["c"], axis=0, keepdims=True),
    ),
    Case("sum_dim1", "sum(c * c, dim=1)", {"c": M23}, lambda e: np.sum(e["c"] ** 2, axis=1)),
    Case(
        "sum_keepdim_broadcast",
        "c.sum(dim=0, keepdim=True) * c",
        {"c": M23},
        lambda e: np.sum(e["c"], axis=0, keepdims=True) * e["c"],
    ),
    Case("sum_tuple_dims", "torch.sum(X * X, dim=(0, 2))", {"X": T234}, lambda e: np.sum(e["X"] ** 2, axis=(0, 2))),
    Case(
        "sum_tuple_dims_keepdim",
        "X.sum(dim=(-1, 0), keepdim=True) * X",
        {"X": T234},
        lambda e: np.sum(e["X"], axis=(2, 0), keepdims=True) * e["X"],
    ),
    Case("sum_all_keepdim", "c.sum(keepdim=True) * c", {"c": M23}, lambda e: np.sum(e["c"], keepdims=True) * e["c"]),
    Case(
        "mean_all_and_dim", "mean(c) * c.mean(dim=-1)", {"c": M23}, lambda e: np.mean(e["c"]) * np.mean(e["c"], axis=-1)
    ),
    Case(
        "mean_keepdim",
        "c - c.mean(dim=1, keepdim=True)",
        {"c": M23},
        lambda e: e["c"] - np.mean(e["c"], axis=1, keepdims=True),
    ),
    Case("prod_all", "prod(x)", {"x": A3}, lambda e: np.prod(e["x"]), closed_grads=_prod_grads),
    Case(
        "prod_dim",
        "c.prod(dim=1) + torch.prod(c, dim=0, keepdim=True).sum()",
        {"c": M23},
        lambda e: np.prod(e["c"], axis=1) + np.sum(np.prod(e["c"], axis=0, keepdims=True)),
    ),
    Case("norm_p2_default", "norm(x)", {"x": A3}, lambda e: pnorm(e["x"]), closed_grads=_norm_grads),
    Case("norm_p1", "x.norm(p=1) * x", {"x": A3}, lambda e: pnorm(e["x"], 1.0) * e["x"]),
    Case("norm_p3", "torch.norm(x, p=3)", {"x": A3}, lambda e: pnorm(e["x"], 3.0)),
    Case("norm_dim", "c.norm(dim=1)", {"c": M23}, lambda e: pnorm(e["c"], 2.0, axis=1)),
    Case(
        "norm_dim_keepdim_p1",
        "c / c.norm(p=1, dim=0, keepdim=True)",
        {"c": M23},
        lambda e: e["c"] / pnorm(e["c"], 1.0, axis=0, keepdims=True),
    ),
    # softmax
    Case("softmax_vector", "softmax(x, dim=0)", {"x": A3}, lambda e: softmax(e["x"], 0), closed_jac=_softmax_jac),
    Case(
        "log_softmax_vector",
        "x.log_softmax(dim=0)",
        {"x": A3},
        lambda e: log_softmax(e["x"], 0),
        closed_jac=_log_softmax_jac,
    ),
    Case("softmax_rows", "torch.softmax(c, dim=1)", {"c": M23}, lambda e: softmax(e["c"], 1)),
    Case("softmax_cols", "c.softmax(dim=0) * c", {"c": M23}, lambda e: softmax(e["c"], 0) * e["c"]),
    Case("log_softmax_neg_dim", "log_softmax(c, dim=-1)", {"c": M23}, lambda e: log_softmax(e["c"], 1)),
    # detach / .data
    Case(
        "detach_method",
        "y = x * x.detach()",
        {"x": A3},
        lambda e, z: e["x"] * z["x"],
        frozen=True,
        closed_grads=lambda e, v: {"x": v * e["x"]},
    ),
    Case(
        "data_attribute",
        "y = x.data * x + x",
        {"x": A3},
        lambda e, z: z["x"] * e["x"] + e["x"],
        frozen=True,
        closed_grads=lambda e, v: {"x": v * (e["x"] + 1)},
    ),
    Case(
        "detach_other_leaf",
        "y = a * 2 + torch.detach(b) * a",
        {"a": A3, "b": B3},
        lambda e, z: 2 * e["a"] + z["b"] * e["a"],
        frozen=True,
        zero_grads=("b",),
        closed_grads=lambda e, v: {"a": v * (2 + e["b"]), "b": np.zeros(3)},
    ),
    # unused leaf
    Case("unused_leaf", "u = b * b\ny = a * 2", {"a": A3, "b": B3}, lambda e: 2 * e["a"], zero_grads=("b",)),
    # loops
    Case(
        "while_loop_randn",
        "y = x*2\nwhile y.data.norm() < 1000:\n    y = y*2",
        {"x": ("randn(3)", _torch_randn((3,), 5))},
        _while_fn,
        frozen=True,
        seed=5,
        closed_grads=_while_grads,
    ),
    Case(
        "for_loop_power",
        "y = x\nfor i in range(3):\n    y = y*x",
        {"x": A3},
        lambda e: e["x"] ** 4,
        closed_grads=lambda e, v: {"x": 4 * e["x"] ** 3 * v},
    ),
    Case(
        "for_loop_uses_index",
        "y = x * 0\nfor i in range(1, 4):\n    y = y + i * sin(x * i)",
        {"x": A3},
        lambda e: sum(i * np.sin(e["x"] * i) for i in range(1, 4)),
    ),
    # if/else, both branches
    Case("if_first_branch", "if x.sum() > 0:\n    y = x * x\nelse:\n    y = -3 * x", {"x": POS3}, _if_fn),
    Case(
        "if_else_branch", "if x.sum() > 0:\n    y = x * x\nelse:\n    y = -3 * x", {"x": lit([-0.5, 0.2, -1.0])}, _if_fn
    ),
    # augmented assignment
    Case(
        "augmented_assignment",
        "y = a * 1\ny += b * b\ny *= a\ny -= c\ny /= 2\ny **= 2",
        {"a": A3, "b": B3, "c": POS3},
        _aug_fn,
    ),
    Case("augmented_on_leaf", "a += b\ny = a * a", {"a": A3, "b": B3}, lambda e: (e["a"] + e["b"]) ** 2),
    # multi-statement with intermediates
    Case(
        "multi_statement",
        "h = tanh(W @ x + b); z = h.sum() * 2\nloss = z + (h * h).mean()",
        {"W": W34, "x": X4, "b": B3W},
        lambda e: 2 * np.sum(np.tanh(e["W"] @ e["x"] + e["b"])) + np.mean(np.tanh(e["W"] @ e["x"] + e["b"]) ** 2),
    ),
    # 0-d scalars (default v = 1)
    Case(
        "scalars_0d",
        "a * b + sin(a) / b",
        {"a": lit(0.5), "b": lit(2.0)},
        lambda e: e["a"] * e["b"] + np.sin(e["a"]) / e["b"],
        closed_grads=lambda e, v: {
            "a": v * (e["b"] + np.cos(e["a"]) / e["b"]),
            "b": v * (e["a"] - np.sin(e["a"]) / e["b"] ** 2),
        },
    ),
    Case(
        "scalar_reduction_output",
        "(c * c).sum() + a.prod()",
        {"c": M23, "a": A3},
        lambda e: np.sum(e["c"] ** 2) + np.prod(e["a"]),
    ),
    # --output selects an intermediate
    Case(
        "output_intermediate",
        "z = 2*x; loss = z.sum(dim=1)",
        {"x": lit([[1, 2, 3, 4]])},
        lambda e: 2 * e["x"],
        output="z",
        closed_grads=lambda e, v: {"x": 2 * v},
    ),
    Case(
        "output_intermediate_loss_default_v",
        "z = 2*x; loss = z.sum(dim=1)",
        {"x": lit([[1, 2, 3, 4]])},
        lambda e: np.sum(2 * e["x"], axis=1),
        closed_grads=lambda e, v: {"x": 2 * v[:, None] * np.ones((1, 4))},
    ),
    Case(
        "output_middle_of_three",
        "h = exp(a) * b\nz = h * h\nw = z.sum()",
        {"a": A3, "b": B3},
        lambda e: (np.exp(e["a"]) * e["b"]) ** 2,
        output="z",
    ),
    # value generators
    Case(
        "gen_ones_eye",
        "(M + E) @ M",
        {"M": ("ones(2,2)", np.ones((2, 2))), "E": ("eye(2)", np.eye(2))},
        lambda e: (e["M"] + e["E"]) @ e["M"],
    ),
    Case(
        "gen_linspace",
        "x * x * x - sin(x)",
        {"x": ("linspace(0,1,5)", np.linspace(0, 1, 5))},
        lambda e: e["x"] ** 3 - np.sin(e["x"]),
    ),
    Case(
        "gen_full",
        "F.softmax(dim=1) * F",
        {"F": ("full(2,3,0.5)", np.full((2, 3), 0.5))},
        lambda e: softmax(e["F"], 1) * e["F"],
    ),
    Case("gen_arange", "x * x + cos(x)", {"x": ("arange(4)", np.arange(4.0))}, lambda e: e["x"] ** 2 + np.cos(e["x"])),
    Case("gen_eye3", "sum(E * E * 3, dim=0)", {"E": ("eye(3)", np.eye(3))}, lambda e: np.sum(3 * e["E"] ** 2, axis=0)),
]

# bigger blocks: past the 64-row loop, the Jacobian comes from torch.func (jacrev / jacfwd over a replay)
X8_10 = lit(np.round(np.sin(np.arange(80.0)).reshape(8, 10), 4))
W10_9 = lit(np.round(np.cos(np.arange(90.0) * 0.7).reshape(10, 9), 4))
R1_10 = lit(np.round(np.linspace(-1, 1, 10).reshape(1, 10) + 0.01, 4))
C10_1 = lit(np.round(np.linspace(0.5, -2, 10).reshape(10, 1), 4))


def _nested_for(e: Env) -> np.ndarray:
    y = e["x"] * 1
    for i in range(2):
        for j in range(3):
            y = y * e["x"] + i - j
    return y


def _countdown(e: Env) -> np.ndarray:
    y = e["x"] * 0
    for i in range(3, 0, -1):
        y = y * i + e["x"] ** i
    return y


def _if_in_for(e: Env) -> np.ndarray:
    y = e["x"] * 1
    for i in range(4):
        if i > 1:
            y = y * e["x"]
        else:
            y = y + e["x"] * i
    return y


def _while_and(e: Env, z: Env) -> np.ndarray:
    y, yz, n = e["x"] * 1, z["x"] * 1, 0
    while np.sum(yz) < 50 and n < 10:
        y, yz, n = y * 1.5 + e["x"], yz * 1.5 + z["x"], n + 1
    return y


MORE_CASES: list[Case] = [
    Case("jacrev_big_output", "X @ W", {"X": X8_10, "W": W10_9}, lambda e: e["X"] @ e["W"]),
    Case("jacfwd_outer_product", "tanh(r * col)", {"r": R1_10, "col": C10_1}, lambda e: np.tanh(e["r"] * e["col"])),
    Case(
        "nested_for",
        "y = x * 1\nfor i in range(2):\n    for j in range(3):\n        y = y * x + i - j",
        {"x": lit([0.9, -0.6])},
        _nested_for,
    ),
    Case(
        "for_negative_step_index_exponent",
        "y = x * 0\nfor i in range(3, 0, -1):\n    y = y * i + x ** i",
        {"x": A3},
        _countdown,
    ),
    Case(
        "if_inside_for",
        "y = x * 1\nfor i in range(4):\n    if i > 1:\n        y = y * x\n    else:\n        y = y + x * i",
        {"x": A3},
        _if_in_for,
    ),
    Case(
        "while_and_condition",
        "y = x * 1\nn = 0\nwhile y.sum() < 50 and n < 10:\n    y = y * 1.5 + x\n    n = n + 1",
        {"x": POS3},
        _while_and,
        frozen=True,
        output="y",
    ),  # the last assignment is n: name the output
    Case(
        "chained_comparison_not",
        "if not 0 < x.sum() < 1:\n    y = x * 3\nelse:\n    y = x * x",
        {"x": POS3},
        lambda e: e["x"] * 3 if not 0 < np.sum(e["x"]) < 1 else e["x"] ** 2,
    ),
    Case(
        "precedence_neg_pow",
        "-x ** 2 + 2 ** -x + x / 0.5 ** 2 + 1e-3 * x",
        {"x": A3},
        lambda e: -(e["x"] ** 2) + 2.0 ** (-e["x"]) + e["x"] / 0.25 + 1e-3 * e["x"],
    ),
    Case(
        "function_of_number",
        "exp(2) * x + sqrt(x * x) - torch.sin(1.5) / x",
        {"x": A3},
        lambda e: np.exp(2.0) * e["x"] + np.abs(e["x"]) - np.sin(1.5) / e["x"],
    ),
    Case("dot_broadcast", "(a @ b) * a - b.T", {"a": A3, "b": B3}, lambda e: (e["a"] @ e["b"]) * e["a"] - e["b"]),
    Case(
        "mean_tuple_dims",
        "mean(X, dim=(0, 1)) * X.mean(dim=(0, 2), keepdim=True).sum()",
        {"X": T234},
        lambda e: np.mean(e["X"], axis=(0, 1)) * np.sum(np.mean(e["X"], axis=(0, 2), keepdims=True)),
    ),
    Case(
        "norm_tuple_dims_keepdim",
        "c.norm(dim=(0, 1)) + X.norm(p=2, dim=1, keepdim=True)",
        {"c": M23, "X": T223},
        lambda e: pnorm(e["c"], 2.0, axis=(0, 1)) + pnorm(e["X"], 2.0, axis=1, keepdims=True),
    ),
    Case(
        "prod_keepdim_last",
        "prod(c, dim=-1, keepdim=True) * c",
        {"c": M23},
        lambda e: np.prod(e["c"], axis=-1, keepdims=True) * e["c"],
    ),
    Case(
        "softmax_3d",
        "softmax(X, dim=1) + log_softmax(X, dim=-2) * X",
        {"X": T234},
        lambda e: softmax(e["X"], 1) + log_softmax(e["X"], 1) * e["X"],
    ),
    Case(
        "abs_sum_scalar", "abs(x).sum() * relu(x)", {"x": A3}, lambda e: np.sum(np.abs(e["x"])) * np.maximum(e["x"], 0)
    ),
    Case(
        "loop_var_exponent",
        "y = x * 0\nfor i in range(3):\n    y = y + x ** i + i",
        {"x": A3},
        lambda e: sum(e["x"] ** i + i for i in range(3)),
    ),
    Case(
        "scalar_leaf_with_vector", "s * x + s ** 2", {"s": lit(0.7), "x": A3}, lambda e: e["s"] * e["x"] + e["s"] ** 2
    ),
    Case(
        "random_inputs_in_program_order",
        "sin(p) * q + q.sum(dim=0)",
        {"q": ("rand(2,3)", _RAND2[1]), "p": ("randn(3)", _RAND2[0])},
        lambda e: np.sin(e["p"]) * e["q"] + np.sum(e["q"], axis=0),
        seed=11,
    ),
    Case("norm_p_half", "x.norm(p=0.5)", {"x": A3}, lambda e: pnorm(e["x"], 0.5)),
    Case(
        "prod_with_one_zero",
        "prod(x)",
        {"x": lit([0.0, 2.0, 3.0])},
        lambda e: np.prod(e["x"]),
        closed_grads=lambda e, v: {"x": v * np.array([6.0, 0.0, 0.0])},
    ),
    Case(
        "prod_with_two_zeros",
        "x.prod() + c.prod(dim=1).sum()",
        {"x": lit([0.0, 0.0, 3.0]), "c": lit([[0.0, 1.5, -2.0], [0.0, 0.0, 4.0]])},
        lambda e: np.prod(e["x"]) + np.sum(np.prod(e["c"], axis=1)),
        closed_grads=lambda e, v: {"x": np.zeros(3), "c": v * np.array([[-3.0, 0.0, 0.0], [0.0, 0.0, 0.0]])},
    ),
    Case(
        "gen_eye_rect_arange_step",
        "E @ x",
        {"E": ("eye(2,4)", np.eye(2, 4)), "x": ("arange(1, 2, 0.25)", np.arange(1, 2, 0.25))},
        lambda e: e["E"] @ e["x"],
    ),
    Case(
        "leaf_only_in_condition",
        "if b.sum() > 0:\n    y = a * 2\nelse:\n    y = a * 3",
        {"a": A3, "b": B3},
        lambda e, z: e["a"] * (2 if np.sum(z["b"]) > 0 else 3),
        frozen=True,
        zero_grads=("b",),
    ),
    Case("for_zero_iterations", "y = x * 1\nfor i in range(0):\n    y = y * x", {"x": A3}, lambda e: e["x"] * 1),
    Case("output_is_a_leaf", "y = x * 2", {"x": A3}, lambda e: e["x"], output="x", closed_grads=lambda e, v: {"x": v}),
    Case(
        "keepdim_leaf_shape_1", "r * 2 + r.sum()", {"r": lit([[0.4, -0.3, 1.2]])}, lambda e: e["r"] * 2 + np.sum(e["r"])
    ),
]
CASES += MORE_CASES

# cases also run at float32 (against a float64 oracle, float32 tolerance)
FLOAT32_IDS = [
    "seed_formula",
    "elementwise_chain",
    "tanh_layer_W_leaf",
    "softmax_rows",
    "norm_dim",
    "matmul_batched_3d_2d",
    "for_loop_power",
    "while_loop_randn",
    "jacrev_big_output",
    "jacfwd_outer_product",
]
