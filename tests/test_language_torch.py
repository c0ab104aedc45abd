"""The PyTorch people paste: indexing, masks, where, tensors and leaves made in the program, shapes.

Each program runs through explore() and its grads are compared with plain torch running the same
computation in the test itself (an independent oracle); every check must agree (or be skipped with a
reason), never disagree.
"""

from __future__ import annotations

import ast
import math

import pytest
import torch

from vjp_explorer import explore
from vjp_explorer.errors import VjpError
from vjp_explorer.language.parser import parse_program

X = [1.0, -2.0, 3.0, 0.5, -0.25, 2.0]


def _x() -> torch.Tensor:
    return torch.tensor(X, dtype=torch.float64, requires_grad=True)


# (program, the same computation in torch, v)
CASES = [
    ("x.sum() / len(x) + x[0] * x.shape[0]", lambda x: x.sum() / len(x) + x[0] * x.shape[0], None),
    ("x * x.size(-1) / x.numel() + x.dim()", lambda x: x * x.size(-1) / x.numel() + x.dim(), X),
    ("x / math.sqrt(x.size(0)) * x.ndim", lambda x: x / math.sqrt(x.size(0)) * x.ndim, X),
    ("x / math.sqrt(x.abs().sum())", lambda x: x / math.sqrt(x.abs().sum().item()), X),  # a float: no grad through it
    ("x * math.exp(x[0])", lambda x: x * math.exp(x[0].item()), X),
    ("x[0] * x[1:].sum()", lambda x: x[0] * x[1:].sum(), None),
    ("x[1:5:2] * x[-2:]", lambda x: x[1:5:2] * x[-2:], [1.0, 2.0]),
    ("x.reshape(2, 3)[:, 0] * 3", lambda x: x.reshape(2, 3)[:, 0] * 3, [1.0, -1.0]),
    ("x.reshape(2, 3)[..., None, 1]", lambda x: x.reshape(2, 3)[..., None, 1], [[1.0], [2.0]]),
    ("x[[0, 2, 2]] ** 2", lambda x: x[[0, 2, 2]] ** 2, [1.0, 2.0, 3.0]),
    ("x[x > 0].sum()", lambda x: x[x > 0].sum(), None),
    ("(x > 0).float() * x", lambda x: (x > 0).double() * x, X),
    ("x * (x > 0)", lambda x: x * (x > 0), X),
    ("x * ((x > 2) | (x < -1)) * ~(x == 3)", lambda x: x * ((x > 2) | (x < -1)) * ~(x == 3), X),
    ("torch.where(x > 0, x ** 2, -x)", lambda x: torch.where(x > 0, x**2, -x), X),
    ("x.where(x > 0, 0.1 * x)", lambda x: x.where(x > 0, 0.1 * x), X),
    ("x.masked_fill(x < 0, 0.0) * x", lambda x: x.masked_fill(x < 0, 0.0) * x, X),
    ("torch.cat([x, x * 2], dim=0)[3:9]", lambda x: torch.cat([x, x * 2], dim=0)[3:9], X),
    ("torch.stack([x, x ** 2]).sum(dim=1)", lambda x: torch.stack([x, x**2]).sum(dim=1), [1.0, 2.0]),
    ("x.view(3, 2).mT.flip(0).roll(1, 1)", lambda x: x.view(3, 2).mT.flip(0).roll(1, 1), [[1.0, 2.0, 3.0]] * 2),
    ("x.unsqueeze(0).expand(2, -1).sum(0)", lambda x: x.unsqueeze(0).expand(2, -1).sum(0), X),
    ("(x * torch.tensor([1, 2, 3, 4, 5, 6])).sum()", lambda x: (x * torch.tensor([1, 2, 3, 4, 5, 6])).sum(), None),
    (
        "(x * torch.arange(6) + torch.ones_like(x)).sum()",
        lambda x: (x * torch.arange(6) + torch.ones_like(x)).sum(),
        None,
    ),
    ("x.sum() * math.pi + torch.pi", lambda x: x.sum() * math.pi + torch.pi, None),
    ("t = x * 2\ny = t.sum()", lambda x: (x * 2).sum(), None),
    ("n = 3\ny = x\nfor i in range(1, n + 1):\n    y = y * i", lambda x: x * 6, X),
    ("a, b = x.chunk(2)\ny = a * b", lambda x: x[:3] * x[3:], [1.0, 2.0, 3.0]),
    ("x.split(2)[1] * 3 + torch.split(x, [2, 4])[1][0]", lambda x: x[2:4] * 3 + x[2], [1.0, 2.0]),
    ("r, s, t = x.reshape(3, 2).unbind(0)\ny = r * s + t", lambda x: x[0:2] * x[2:4] + x[4:], [1.0, 2.0]),
    (
        "x.reshape(2, 3).gather(1, torch.tensor([[0, 2], [1, 1]]))",
        lambda x: x.reshape(2, 3).gather(1, torch.tensor([[0, 2], [1, 1]])),
        [[1.0, 2.0], [3.0, 4.0]],
    ),
    (
        "x.index_select(0, torch.tensor([2, 0])) * x[1]",
        lambda x: x.index_select(0, torch.tensor([2, 0])) * x[1],
        [1.0, 2.0],
    ),
    (
        "s = x[0] * 0\nfor i in range(3):\n    s = s + x[i] * x[5 - i]",
        lambda x: x[0] * x[5] + x[1] * x[4] + x[2] * x[3],
        None,
    ),
    (
        "s = x[0:2] * 0\nfor i in range(2):\n    s = s + x[i:i + 2] ** 2",
        lambda x: x[0:2] ** 2 + x[1:3] ** 2,
        [1.0, 2.0],
    ),
    ("y = torch.zeros(6)\nfor i in range(6):\n    y[i] = x[i] ** 2\nz = y * 2", lambda x: (x**2) * 2, X),
    (
        "y = torch.zeros(6)\ny[x > 0] = x[x > 0] * 3\ny[0:2] = x[4:]",
        lambda x: torch.cat([x[4:], torch.where(x > 0, 3 * x, 0)[2:]]),
        X,
    ),
    ("x.clamp(max=float('inf')) * 2", lambda x: x.clamp(max=float("inf")) * 2, X),
]


@pytest.mark.parametrize(("program", "fn", "v"), CASES, ids=[c[0] for c in CASES])
def test_program_matches_plain_torch(program, fn, v):
    x = _x()
    out = fn(x)
    grad = torch.ones_like(out) if v is None else torch.tensor(v, dtype=torch.float64)
    out.backward(grad)
    r = explore(program, {"x": ",".join(map(str, X))}, grad=None if v is None else str(v), dtype="float64")
    got = torch.tensor(r.grads["x"].tolist(), dtype=torch.float64)
    assert torch.allclose(got, x.grad, rtol=1e-12, atol=1e-12), (got, x.grad)
    statuses = {k: (c.status, c.reason) for k, c in r.checks.items()}
    assert all(c.status != "disagree" for c in r.checks.values()), statuses
    assert r.checks["symbolic"].status == "agree", statuses


def test_a_program_makes_its_own_leaves():
    r = explore("x = torch.tensor([1.0, 2.0], requires_grad=True); y = (x**2).sum()", {})
    assert r.grads["x"].tolist() == [2.0, 4.0]
    assert all(c.status in ("agree", "skipped") for c in r.checks.values())
    r = explore("w = torch.tensor([[1.0, 2.0], [3.0, 4.0]]).requires_grad_(); y = (w @ w).sum()", {})
    assert r.grads["w"].tolist() == [[7.0, 11.0], [9.0, 13.0]]


def test_the_imports_pasted_code_starts_with_are_accepted():
    program = (
        "import torch\nimport math\nimport torch.nn.functional as F\n"
        "x = torch.tensor([1.0, -2.0], requires_grad=True)\ny = F.relu(x).sum()"
    )
    assert explore(program, {}).grads["x"].tolist() == [1.0, 0.0]


def test_random_leaves_and_constants_follow_the_seed():
    program = "a = torch.randn(3, requires_grad=True); y = (a * torch.rand(3)).sum()"
    r1, r2 = explore(program, {}, seed=7), explore(program, {}, seed=7)
    assert r1.grads["a"].tolist() == r2.grads["a"].tolist()
    gen = torch.Generator().manual_seed(7)
    a = torch.randn(3, generator=gen)
    c = torch.rand(3, generator=gen)
    assert torch.allclose(torch.tensor(r1.grads["a"].tolist()), c)
    assert all(k.status in ("agree", "skipped") for k in r1.checks.values())
    assert a.numel() == 3


def test_where_over_a_singular_branch_is_a_disagreement():
    """torch.where(x > 0, log(x), 0) at x = 0: backward gives 0 × inf = nan, the exact derivative is 0."""
    r = explore("torch.where(x > 0, torch.log(x), 0)", {"x": "0,1,2"}, grad="ones")
    assert math.isnan(r.grads["x"].tolist()[0])
    assert r.checks["symbolic"].status == "disagree"
    assert r.symbolic["x"].tolist()[0] == 0.0
    assert "LogBackward0" in " ".join(n.text for n in r.notes)


def test_a_flipping_mask_is_a_kink_for_finite_differences():
    r = explore("x * (x > 1)", {"x": "1,2,3"}, grad="ones", dtype="float64")
    fd = r.checks["finite_difference"]
    assert fd.status == "agree" and "mask" in (fd.reason or ""), fd.reason


def test_parse_time_of_a_thousand_node_program():
    import time

    program = "y = x[0]\n" + "\n".join(f"y = y + x[{i % 5}] * torch.where(x > {i}, x, 0)[1:3].sum()" for i in range(45))
    parse_program(program)  # warm
    t0 = time.perf_counter()
    prog = parse_program(program)
    elapsed = time.perf_counter() - t0
    assert elapsed < 0.5, elapsed  # a hang guard; bench/ records the real number
    assert prog.free == ("x",)


def test_made_tensors_follow_the_replay_dtype():
    """A float32 run replays in float64 for finite differences: its made tensors go along, exactly."""
    r = explore("x.reshape(2, 3) @ torch.ones(3) + torch.rand(2)", {"x": "1,2,3,4,5,6"}, grad="1,2", seed=1)
    statuses = {k: (c.status, c.reason) for k, c in r.checks.items()}
    assert r.checks["finite_difference"].status == "agree", statuses
    assert r.grads["x"].tolist() == [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]


def test_a_condition_may_compare_tensors_of_one_element():
    r = explore("if x.sum() > 0:\n    y = x * 2\nelse:\n    y = x", {"x": "1,2"}, grad="ones")
    assert r.grads["x"].tolist() == [2.0, 2.0]


_ATOMS = [
    "x",
    "x[0]",
    "x[1:]",
    "x[::2]",
    "x[..., None]",
    "x[[0, 1]]",
    "x[x > 0]",
    "(x > 0)",
    "torch.tensor([1, 2])",
    "torch.tensor([1.0, 2.0, 3.0])",
    "torch.ones(3)",
    "torch.zeros(2, 3)",
    "torch.arange(3)",
    "torch.rand(3)",
    "0.5",
]
_FORMS = [
    "{}.reshape(-1)",
    "{}.flip(0)",
    "{}.sum()",
    "{}.float()",
    "{}.double()",
    "{}.unsqueeze(0)",
    "{}.mT",
    "~{}",
    "{}.chunk(2)[0]",
    "{}.unbind(0)[0]",
    "{}[1:]",
    "{}[{} > 0]",
    "torch.where({} > 0, {}, 0)",
    "({} @ {})",
    "{}.masked_fill({} > 1, 0.0)",
    "{}.gather(0, torch.tensor([0]))",
    "{}.expand(2, -1)",
    "torch.cat([{}, {}])",
    "torch.stack([{}, {}])",
    "exp({})",
    "({} * {})",
    "({} & {})",
    "({} - {})",
    "{}.to(torch.float64)",
]


def test_generated_programs_run_or_fail_cleanly():
    """Random compositions of the new surface: a result, or one of our errors; never another exception."""
    import random

    from vjp_explorer.errors import VjpError

    rng = random.Random(18)

    def gen(depth: int) -> str:
        if depth == 0 or rng.random() < 0.3:
            return rng.choice(_ATOMS)
        form = rng.choice(_FORMS)
        return form.format(*(gen(depth - 1) for _ in range(form.count("{}"))))

    for _ in range(40):
        program = gen(3)
        if "x" not in program:
            continue
        try:
            explore(program, {"x": "1,-2,3"}, grad="random", seed=1)
        except VjpError:
            pass


# ---------------------------------------------------------------- whole-number constants where torch needs ints


def eval_value(text: str) -> object:
    return ast.literal_eval(text if text.startswith("[") or "," not in text else f"[{text}]")


def _torch_program(program: str, ns: dict[str, torch.Tensor]) -> torch.Tensor:
    """Plain torch on the same text (our own test data, never user input)."""
    tree = ast.parse(program)
    last = tree.body[-1]
    if isinstance(last, ast.Expr):
        tree.body[-1] = ast.fix_missing_locations(
            ast.copy_location(ast.Assign(targets=[ast.Name("out", ast.Store())], value=last.value), last)
        )
    scope = {"torch": torch, "F": torch.nn.functional, **ns}
    exec(compile(tree, "<reference>", "exec"), scope)
    return scope["out"]


@pytest.mark.parametrize(
    ("program", "values", "consts"),
    [
        ("F.cross_entropy(x, t)", {"x": "[[0.1, 0.2, 0.3], [1.0, -1.0, 0.5]]"}, {"t": "2,0"}),
        ("F.nll_loss(F.log_softmax(x, dim=1), t)", {"x": "[[0.1, 0.2, 0.3], [1.0, -1.0, 0.5]]"}, {"t": "1,0"}),
        ("out = a[i, j] * a[i, j]", {"a": "[[1, 2, 3], [4, 5, 6]]"}, {"i": "1", "j": "2"}),
        ("(a[k] * 2).sum()", {"a": "[[1, 2, 3], [4, 5, 6]]"}, {"k": "0,1,1"}),
    ],
)
def test_whole_number_constants_serve_where_torch_needs_integers(program, values, consts):
    """The command line has no integer type: `--const t=2,0` is taken as the int64 tensor torch code holds."""
    r = explore(program, values, consts=consts)
    ns = {n: torch.tensor(eval_value(v), dtype=torch.float32, requires_grad=True) for n, v in values.items()}
    ints = {n: torch.tensor(eval_value(v), dtype=torch.int64) for n, v in consts.items()}
    out = _torch_program(program, {**ns, **ints})
    out.backward()
    for n, t in ns.items():
        assert list(r.grads[n].flat) == pytest.approx(t.grad.flatten().tolist(), rel=1e-5, abs=1e-6)
    assert all(c.status == "agree" for c in r.checks.values() if c.status != "skipped"), r.checks
    assert r.checks["symbolic"].status == "agree"


def test_a_fractional_constant_is_no_index():
    with pytest.raises(VjpError, match="index must be"):
        explore("a[i] * 2", {"a": "1,2,3"}, consts={"i": "1.5"})
    with pytest.raises(VjpError, match="nll_loss.. failed.*int64"):
        explore("F.nll_loss(x, t)", {"x": "[[1, 2], [3, 4]]"}, consts={"t": "0.5,1"})


# ---------------------------------------------------------------- sizes, dims and ranges read when the call runs


@pytest.mark.parametrize(
    ("program", "values", "consts"),
    [
        ("h = x.view(x.size(0), -1)\nout = (h * h).sum()", {"x": "[[[1, 2], [3, 4]], [[5, 6], [7, 8]]]"}, {}),
        ("out = (x.view(len(x), -1) ** 2).sum()", {"x": "[[[1, 2], [3, 4]], [[5, 6], [7, 8]]]"}, {}),
        ("out = ((y - x.reshape(y.shape)) ** 2).sum()", {"x": "1,2,3,4", "y": "[[1, 0], [2, 5]]"}, {}),
        ("out = (x.sum(dim=d) ** 2).sum()", {"x": "[[1, 2, 3], [4, 5, 6]]"}, {"d": "1"}),
        ("out = (x.flatten(0, x.dim() - 1) * 3).sum()", {"x": "[[1, 2], [3, 4]]"}, {}),
        (
            "a, b = x.size()\nout = (x.view(a * b) / (a * b)).sum()",
            {"x": "[[1, 2, 3], [4, 5, 6]]"},
            {},
        ),
        ("out = (x.sum(dim=len(x.shape) - 1) ** 2).sum()", {"x": "[[1, 2, 3], [4, 5, 6]]"}, {}),
        ("out = -torch.log(p[range(len(p)), t]).mean()", {"p": "[[0.1, 0.3, 0.6], [0.3, 0.2, 0.5]]"}, {"t": "0,2"}),
        ("out = (x[list(range(1, 3))] ** 2).sum()", {"x": "1,2,3"}, {}),
        ("out = torch.einsum('ik,kj->ij', [a, b]).sum()", {"a": "[[1, 2], [3, 4]]", "b": "[[5, 6], [7, 8]]"}, {}),
        ("m, _ = x.max(dim=1)\nout = (m * m).sum()", {"x": "[[1, 5, 3], [4, 2, 6]]"}, {}),
        ("out = (x.unsqueeze(0).expand(3, -1, -1) * 2).sum()", {"x": "[[1, 5], [4, 2]]"}, {}),
        ("out = (x * torch.ones(x.shape)).sum() + (x @ torch.eye(x.size(1))).sum()", {"x": "[[1, 5], [4, 2]]"}, {}),
        ("out = ((x + torch.full((len(x), 1), 0.5)) ** 2).sum()", {"x": "[[1, 5], [4, 2]]"}, {}),
        ("out = (x[torch.arange(len(x))] * torch.zeros(x.size(0), 2).add(3)).sum()", {"x": "[[1, 5], [4, 2]]"}, {}),
        ("out = (x.unsqueeze(0).expand(len(x), -1, -1) ** 2).sum()", {"x": "[[1, 5], [4, 2]]"}, {}),
    ],
)
def test_sizes_read_when_the_call_runs_match_torch(program, values, consts):
    r = explore(program, values, consts=consts)
    ns = {n: torch.tensor(eval_value(v), dtype=torch.float32, requires_grad=True) for n, v in values.items()}
    names = {n: torch.tensor(eval_value(v), dtype=torch.int64) for n, v in consts.items()}
    scope_consts = {n: int(t) if t.ndim == 0 else t for n, t in names.items()}  # Python ints where torch wants them
    out = _torch_program(program, {**ns, **scope_consts})
    out.backward()
    for n, t in ns.items():
        assert list(r.grads[n].flat) == pytest.approx(t.grad.flatten().tolist(), rel=1e-5, abs=1e-6), n
    assert {c.status for c in r.checks.values()} <= {"agree", "skipped"}, r.checks
    assert r.checks["symbolic"].status == "agree"


@pytest.mark.parametrize(
    ("program", "values", "consts", "words"),
    [
        ("x.sum(dim=d)", {"x": "[[1, 2], [3, 4]]"}, {"d": "0.5"}, "must be a whole number, not 0.5"),
        ("x.view(x, -1)", {"x": "1,2,3,4"}, {}, "is one number; this is a tensor of shape [4]"),
        ("a, b = x.size()\nx * a", {"x": "[[[1]]]"}, {}, "too many values to unpack (expected 2, got 3)"),
        ("a, b, c = x.shape\nx * a", {"x": "[[1]]"}, {}, "not enough values to unpack (expected 3, got 2)"),
        ("x[range(0)] * 2", {"x": "1,2"}, {}, "range is empty"),
        ("x[range(0, 2, 0)] * 2", {"x": "1,2"}, {}, "must not be zero"),
        ("x.view(len(x) * 3)", {"x": "1,2"}, {}, "view"),
        ("x + torch.zeros(len(x) * 10**9)", {"x": "1,2"}, {}, "torch.zeros(): the value would have 2,000,000,000"),
        ("x + torch.ones(len(x) + 0.5)", {"x": "1,2"}, {}, "torch.ones(): sizes must be positive integers, got 2.5"),
        (
            "x + torch.ones(x)",
            {"x": "1,2"},
            {},
            "torch.ones(): a size or dim is one number; this is a tensor of shape [2]",
        ),
    ],
)
def test_sizes_that_do_not_fit_are_clear_errors(program, values, consts, words):
    with pytest.raises(VjpError) as caught:
        explore(program, values, consts=consts)
    assert words in caught.value.render() and caught.value.source is not None, caught.value.render()


def test_a_recorded_step_holds_the_sizes_as_read():
    """Every route after the forward reads the trace: the Sizes are plain numbers there."""
    from vjp_explorer.language import program as P

    r = explore("h = x.view(x.size(0), -1)\ny = h * 2", {"x": "[[[1, 2]], [[3, 4]]]"}, grad="ones")
    assert r.checks["symbolic"].status == "agree"
    prog = parse_program("h = x.view(x.size(0), -1)\ny = h * 2")
    call = prog.body[0].value
    assert isinstance(call, P.Call) and call.sized and "x" in prog.free


def test_a_negative_integer_literal_keeps_a_tensor_integral():
    # -100 is a minus applied to 100: torch.tensor([0, -100]) is int64 in torch, so ignore_index=-100 (the
    # default) and negative indices work; torch.arange(-2, 1) counts in integers
    r = explore("cross_entropy(x, torch.tensor([0, -100]))", {"x": "[[1,2,3],[1,1,1]]"})
    xs = torch.tensor([[1.0, 2, 3], [1, 1, 1]], requires_grad=True)
    torch.nn.functional.cross_entropy(xs, torch.tensor([0, -100])).backward()
    assert torch.allclose(torch.as_tensor(r.grads["x"]), xs.grad) and int(r.exit_code) == 0
    assert explore("x[torch.tensor([-1, 0])]", {"x": "1,2,3"}, grad="ones").grads["x"].tolist() == [1.0, 0.0, 1.0]
    r = explore("x * torch.arange(-2, 1)", {"x": "1,2,3"}, grad="ones")
    assert r.grads["x"].tolist() == [-2.0, -1.0, 0.0]
