"""Piecewise operations differentiated at the point: the replay holds the branch each one took there.

Each snippet puts an operation at or near its kink (a pre-activation of 1e-7, a tie, a value on a clamp's
bound); autograd differentiates at the point, and so must the finite-difference reference. The grads are
compared with hand-derived values (autograd's documented tie conventions), never with the tool's output.
"""

from __future__ import annotations

import pytest
import torch

from test_confined_observe import checks, observe
from vjp_explorer.confined import kinks


def _fd(event: dict) -> dict:
    return next(c for c in event["checks"] if c["name"] == "finite_difference")


def _grads(event: dict) -> dict[str, list]:
    return {x["name"]: x["grad"] for x in event["inputs"]}


# (snippet, the grads autograd gives at the point, by hand)
AT_THE_KINK = {
    "relu just past 0": (
        "import torch\nx = torch.tensor([1e-7, -1e-7, 2.0], requires_grad=True)\ntorch.relu(x * 3).sum().backward()\n",
        {"x": [3.0, 0.0, 3.0]},
    ),
    "abs at 0": (
        "import torch\nx = torch.tensor([0.0, 1.0, -2.0], requires_grad=True)\n(x.abs() * 2).sum().backward()\n",
        {"x": [0.0, 2.0, -2.0]},
    ),
    "max over all with a tie shares": (
        "import torch\nx = torch.tensor([1.0, 3.0, 3.0], requires_grad=True)\nx.max().backward()\n",
        {"x": [0.0, 0.5, 0.5]},
    ),
    "maximum with a tie halves": (
        "import torch\na = torch.tensor([1.0, 2.0], requires_grad=True)\n"
        "b = torch.tensor([1.0, 0.5], requires_grad=True)\n"
        "torch.maximum(a, b).sum().backward()\n",
        {"a": [0.5, 1.0], "b": [0.5, 0.0]},
    ),
    "clamp on its bounds passes the gradient": (
        "import torch\nx = torch.tensor([0.0, 0.5, 1.0, 1.5], requires_grad=True)\nx.clamp(0, 1).sum().backward()\n",
        {"x": [1.0, 1.0, 1.0, 0.0]},
    ),
    "relu6 on its bounds stops it": (
        "import torch\nx = torch.tensor([0.0, 3.0, 6.0], requires_grad=True)\n"
        "torch.nn.functional.relu6(x).sum().backward()\n",
        {"x": [0.0, 1.0, 0.0]},
    ),
    "sort with a tie": (
        "import torch\nx = torch.tensor([2.0, 1.0, 2.0], requires_grad=True)\n"
        "(torch.sort(x).values * torch.tensor([1.0, 10.0, 100.0])).sum().backward()\n",
        None,  # which of the tied elements gets 10 and which 100 is the sort's own choice: read it back
    ),
    "topk next to a near tie": (
        "import torch\nx = torch.tensor([1.0, 3.0, 3.0 + 1e-6, 0.0], requires_grad=True)\n"
        "(x.topk(2).values * torch.tensor([1.0, 5.0])).sum().backward()\n",
        {"x": [0.0, 5.0, 1.0, 0.0]},
    ),
    "max over a dim keeps its index": (
        "import torch\nx = torch.tensor([[1.0, 1.0 + 1e-6], [4.0, 2.0]], requires_grad=True)\n"
        "x.max(dim=1).values.sum().backward()\n",
        {"x": [[0.0, 1.0], [1.0, 0.0]]},
    ),
    "leaky relu at 0": (
        "import torch\nx = torch.tensor([0.0, -1e-8, 1.0], requires_grad=True)\n"
        "torch.nn.functional.leaky_relu(x, 0.1).sum().backward()\n",
        {"x": [0.1, 0.1, 1.0]},
    ),
    "max pooling with a tie": (
        "import torch\nx = torch.tensor([[[[1.0, 1.0], [0.0, 1.0]]]], requires_grad=True)\n"
        "torch.nn.functional.max_pool2d(x, 2).sum().backward()\n",
        {"x": [[[[1.0, 0.0], [0.0, 0.0]]]]},
    ),
    "smooth l1 on its corner": (
        "import torch\nx = torch.tensor([1.0, 0.0, -3.0], requires_grad=True)\n"
        "torch.nn.functional.smooth_l1_loss(x, torch.zeros(3), reduction='sum').backward()\n",
        {"x": [1.0, 0.0, -1.0]},
    ),
}


@pytest.mark.parametrize("case", AT_THE_KINK)
def test_the_reference_is_taken_at_the_point_as_autograd_takes_it(case):
    src, want = AT_THE_KINK[case]
    (event,), _ = observe(src)
    if want is not None:
        for name, values in want.items():
            got = torch.tensor(_grads(event)[name]).reshape(-1).tolist()
            assert got == pytest.approx(torch.tensor(values).reshape(-1).tolist(), abs=1e-6), name
    assert checks(event) == {"jtv": "agree", "finite_difference": "agree"}, event["checks"]
    fd = _fd(event)
    assert "not a reference" not in (fd.get("reason") or ""), fd  # no element left out at the kink
    for x in event["inputs"]:
        flat = torch.tensor(x["finite_difference"]).reshape(-1).tolist()
        assert flat == pytest.approx(torch.tensor(x["grad"]).reshape(-1).tolist(), abs=1e-6)


def test_the_sort_s_tie_goes_where_autograd_sent_it():
    (event,), _ = observe(AT_THE_KINK["sort with a tie"][0])
    g = _grads(event)["x"]
    assert g[1] == pytest.approx(1.0) and sorted([g[0], g[2]]) == pytest.approx([10.0, 100.0])


MLP_AT_THE_KINK = """
import torch
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
X = torch.randn(32, 20)
with torch.no_grad():  # every pre-activation of the first sample within 1e-6 of relu's kink
    net[0].bias -= net[0](X[:1]).squeeze(0) + 1e-6 * torch.randn(64)
loss = torch.nn.functional.cross_entropy(net(X), torch.randint(0, 2, (32,)))
loss.backward()
"""


def test_a_relu_mlp_whose_pre_activations_sit_at_the_kink_agrees_along_every_direction():
    """The issue's loop in one step: 1,474 parameters, so random directions; a step of all of them moves
    pre-activations across relu's kink, which the reference must not see."""
    (event,), _ = observe(MLP_AT_THE_KINK)
    fd = _fd(event)
    assert fd["status"] == "agree", fd
    assert "directions" in fd["compares"] and "crossed a kink" not in (fd.get("reason") or "")


TRAINING_LOOP = """
import torch
torch.manual_seed(0)
X = torch.randn(64, 20)
Y = (X[:, 0] + X[:, 1] > 0).long()
model = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.5)
for step in range(40):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(X), Y)
    loss.backward()
    opt.step()
"""


def test_a_relu_training_loop_ends_with_every_checked_call_agreeing():
    events, ns = observe(TRAINING_LOOP)
    assert len(events) == 40
    statuses = [c["status"] for e in events for c in e["checks"]]
    assert "disagree" not in statuses and "inconclusive" not in statuses
    assert statuses.count("agree") >= 3 + 4  # the first three in full, then every 10th


def test_an_unheld_kink_makes_a_disagreement_inconclusive():
    from vjp_explorer.snippet.result import Check

    bad = Check("finite_difference", "disagree", "x", reason="direction 1: ...")
    assert kinks.UNHELD >= {"linalg_vector_norm"}
    from vjp_explorer.confined.checks import unheld_kinks

    out = unheld_kinks(bad, ["linalg_vector_norm"])
    assert out.status == "inconclusive" and "linalg_vector_norm" in out.reason
    assert unheld_kinks(bad, []).status == "disagree"  # no unheld kink: a disagreement stays one


def test_a_wrong_backward_through_relu_still_disagrees():
    """Holding the branch must not hide a wrong gradient: a custom relu whose backward passes g
    everywhere (also where x < 0)."""
    src = """
import torch
class LeakyWrong(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clamp(min=0)
    @staticmethod
    def backward(ctx, g):
        return g
x = torch.tensor([-1.0, 2.0, -3.0], requires_grad=True)
LeakyWrong.apply(x).sum().backward()
"""
    (event,), _ = observe(src)
    assert checks(event)["finite_difference"] == "disagree"
    assert event["inputs"][0]["finite_difference"] == pytest.approx([0.0, 1.0, 0.0])


def test_the_held_replay_runs_in_place_relu_too():
    src = (
        "import torch\nx = torch.tensor([1e-8, -2.0, 0.5], requires_grad=True)\n"
        "y = (x * 2).relu_()\n(y * y).sum().backward()\n"
    )
    (event,), _ = observe(src)
    assert _grads(event)["x"] == pytest.approx([8 * 1e-8, 0.0, 4.0], abs=1e-6)
    assert checks(event) == {"jtv": "agree", "finite_difference": "agree"}


def test_softplus_at_its_threshold_is_inconclusive_not_a_disagreement():
    # torch's softplus is x itself past beta*x = 20, a jump of 2e-9 that the differences straddle at 20:
    # torch's float64 grad there is sigmoid(20), right; the check cannot say, and says why
    src = (
        "import torch\nx = torch.tensor([20.0, 1.0], dtype=torch.float64, requires_grad=True)\n"
        "torch.nn.functional.softplus(x).sum().backward()\n"
    )
    (event,), _ = observe(src)
    assert _grads(event)["x"] == pytest.approx(
        [float(torch.sigmoid(torch.tensor(20.0, dtype=torch.float64))), 0.7310585786300049]
    )
    fd = _fd(event)
    assert fd["status"] == "inconclusive" and "softplus has a kink" in fd["reason"], fd
