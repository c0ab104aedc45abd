"""Kinks and ties named (docs/why.md): where an input sits exactly on relu's 0, a tie of max, a norm of zeros,
the report names the op, the line, the elements and the convention PyTorch followed there.

The oracle is plain torch in float64: each row's gradient is what `backward` gives on the kink, compared with
the value the row's convention states (derived by hand: relu'(0) taken as 0, a tie of two shared 1/2 each);
the elements are read off the input by hand. Off the kink, nothing is named."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from vjp_explorer.confined import conventions
from vjp_explorer.snippet import run_snippet


def _t(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


# table key, the call, its input on the kink, the gradient of sum(call(x)) by hand, the elements on the kink
ON_KINK = {
    "relu": (torch.relu, _t(0.0, 1.0, -1.0), [0.0, 1.0, 0.0], ["[0]"]),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.1), _t(0.0, 2.0), [0.1, 1.0], ["[0]"]),
    "elu": (lambda x: F.elu(x, 2.0), _t(0.0), [2.0], ["[0]"]),
    "threshold": (lambda x: F.threshold(x, 1.0, 0.0), _t(1.0, 3.0), [0.0, 1.0], ["[0]"]),
    "abs": (torch.abs, _t(0.0, -2.0), [0.0, -1.0], ["[0]"]),
    "sqrt": (torch.sqrt, _t(0.0, 4.0), [float("inf"), 0.25], ["[0]"]),
    "hardtanh": (F.relu6, _t(0.0, 6.0, 3.0), [0.0, 0.0, 1.0], ["[0]", "[1]"]),
    "clamp": (lambda x: x.clamp(0.0, 1.0), _t(0.0, 1.0, 0.5, 2.0), [1.0, 1.0, 1.0, 0.0], ["[0]", "[1]"]),
    "maximum": (lambda x: torch.maximum(x, _t(2.0, 0.0)), _t(2.0, 1.0), [0.5, 1.0], ["[0]"]),
    "maximum.max": (lambda x: torch.max(x, _t(2.0, 0.0)), _t(2.0, 1.0), [0.5, 1.0], ["[0]"]),  # runs as maximum
    "minimum": (lambda x: torch.minimum(x, _t(2.0, 5.0)), _t(2.0, 1.0), [0.5, 1.0], ["[0]"]),
    "max.default": (torch.max, _t(1.0, 3.0, 3.0), [0.0, 0.5, 0.5], ["[1]", "[2]"]),
    "min.default": (torch.min, _t(1.0, 1.0, 3.0), [0.5, 0.5, 0.0], ["[0]", "[1]"]),
    "amax": (
        lambda x: x.amax(dim=1),
        torch.tensor([[1.0, 3.0, 3.0], [0.0, 1.0, 2.0]], dtype=torch.float64),
        [[0.0, 0.5, 0.5], [0.0, 0.0, 1.0]],
        ["[0,1]", "[0,2]"],
    ),
    "max.dim": (lambda x: x.max(dim=0).values, _t(1.0, 3.0, 3.0), [0.0, 1.0, 0.0], ["[1]", "[2]"]),
    "median.default": (torch.median, _t(1.0, 2.0, 2.0, 3.0), [0.0, 0.5, 0.5, 0.0], ["[1]", "[2]"]),
    "median.dim": (lambda x: x.median(dim=0).values, _t(2.0, 2.0, 1.0), [1.0, 0.0, 0.0], ["[0]", "[1]"]),
    "linalg_vector_norm": (torch.linalg.vector_norm, _t(0.0, 0.0), [0.0, 0.0], ["[0]", "[1]"]),
    "sort": (lambda x: x.sort().values * _t(1.0, 2.0, 3.0), _t(1.0, 1.0, 0.0), [2.0, 3.0, 1.0], ["[0]", "[1]"]),
    "topk": (lambda x: x.topk(1).values, _t(2.0, 2.0, 0.0), [1.0, 0.0, 0.0], ["[0]", "[1]"]),
}


@pytest.mark.parametrize("key", list(ON_KINK))
def test_each_convention_is_what_plain_torch_does_on_the_kink_and_names_its_elements(key):
    fn, x0, grad, elements = ON_KINK[key]
    x = x0.clone().requires_grad_(True)
    fn(x).sum().backward()
    assert x.grad.tolist() == grad  # plain torch on the kink: the convention the table states
    hits = conventions.of_call((fn, (x0,), {}), 7)
    assert [h["convention"] for h in hits] == [conventions.CONVENTIONS[key.split(".max")[0]].words]
    assert hits[0]["elements"] == elements and hits[0]["count"] == len(elements) and hits[0]["line"] == 7
    away = x0 + torch.linspace(0.11, 0.37, x0.numel(), dtype=torch.float64).reshape(x0.shape)  # no tie, no 0
    assert conventions.of_call((fn, (away,), {}), 7) == []


def test_every_convention_fits_a_line_and_says_where_it_holds():
    for key, conv in conventions.CONVENTIONS.items():
        assert len(conv.words) <= 120, key  # the channel's facts carry at most 120 characters of text
        assert " at " in conv.words and "PyTorch" in conv.words, key


def test_a_norm_of_ord_inf_names_the_tie_of_its_largest_magnitudes():
    x = _t(2.0, -2.0, 1.0).requires_grad_(True)
    torch.linalg.vector_norm(x, ord=float("inf")).backward()
    assert x.grad.tolist() == [0.5, -0.5, 0.0]  # shared evenly, with the sign of each
    hits = conventions.of_call((torch.linalg.vector_norm, (x.detach(),), {"ord": float("inf")}), 1)
    assert hits[0]["elements"] == ["[0]", "[1]"]


KINKED = """\
import torch
x = torch.tensor([0.0, 1.0, -2.0, 0.0], requires_grad=True)
y = torch.relu(x)
m = torch.tensor([3.0, 3.0, 1.0], requires_grad=True)
z = y.sum() + m.max()
z.backward()
print(x.grad, m.grad)
"""

INPLACE_LAYER = """\
import torch
import torch.nn as nn
net = nn.Sequential(nn.Linear(1, 3), nn.ReLU(inplace=True))
with torch.no_grad():
    net[0].weight.copy_(torch.tensor([[1.0], [1.0], [1.0]]))
    net[0].bias.copy_(torch.tensor([-1.0, 0.0, 1.0]))
out = net(torch.zeros(1, 1))
out.sum().backward()
print(net[0].bias.grad)
"""


def test_a_working_call_names_each_kink_its_forward_met_with_line_and_elements():
    r = run_snippet(KINKED, "kinked.py", seed=0)
    assert r.error is None and r.exit_code == 0 and r.diagnoses == []
    assert "tensor([0., 1., 0., 0.]) tensor([0.5000, 0.5000, 0.0000])" in r.stdout  # plain torch, unchanged
    (e,) = r.events
    got = [(k["op"], k["line"], k["elements"], k["count"]) for k in e.kinks]
    assert got == [("relu", 3, ["x[0]", "x[3]"], 2), ("max", 5, ["m[0]", "m[1]"], 2)]
    assert [k["input"] for k in e.kinks] == ["x", "m"]
    assert e.kinks[0]["convention"] == conventions.CONVENTIONS["relu"].words
    assert r.to_dict()["events"][0]["kinks"] == e.kinks
    shown = " ".join(str(r).split())
    doc = (Path(__file__).resolve().parents[1] / "docs" / "why.md").read_text()
    said = [line for line in doc.splitlines() if line.startswith("kink: ")]
    assert len(said) == 2 and all(line in shown for line in said), "docs/why.md is stale"


def test_an_inplace_relu_is_read_before_it_overwrites_its_input():
    # pre-activations -1, 0, 1: only the 0 sits on the kink (after relu_ the -1 is a 0 too, and is no kink)
    r = run_snippet(INPLACE_LAYER, "inplace_layer.py", seed=0)
    assert "tensor([0., 0., 1.])" in r.stdout  # plain torch: relu'(0) = 0
    (e,) = r.events
    # relu_ changes the linear's output in place, and that tensor is what the snippet binds as `out`
    assert [(k["op"], k["line"], k["elements"]) for k in e.kinks] == [("relu", 7, ["out[0,1]"])]
    # out of place, relu's input is a value inside the module with no name of the snippet's: its index alone
    r = run_snippet(INPLACE_LAYER.replace("inplace=True", "inplace=False"), "layer.py", seed=0)
    assert "tensor([0., 0., 1.])" in r.stdout
    assert [(k["input"], k["line"], k["elements"]) for k in r.events[0].kinks] == [("", 7, ["[0,1]"])]


def test_code_off_every_kink_names_none():
    away = KINKED.replace("[0.0, 1.0, -2.0, 0.0]", "[0.5, 1.0, -2.0, 0.25]").replace(
        "[3.0, 3.0, 1.0]", "[3.0, 2.0, 1.0]"
    )
    r = run_snippet(away, "away.py", seed=0)
    assert r.error is None and [e.kinks for e in r.events] == [[]]
    assert "kink" not in str(r)


NORM_AT_ZERO = """\
import torch
x = torch.zeros(3, requires_grad=True)
n = torch.sqrt((x ** 2).sum())
n.backward()
print(x.grad)
"""


def test_the_why_screen_of_a_nan_names_the_kink_its_op_sat_on():
    r = run_snippet(NORM_AT_ZERO, "norm_at_zero.py", seed=0)
    assert "tensor([nan, nan, nan])" in r.stdout  # plain torch: sqrt'(0) = inf, times 2x = 0: nan
    (d,) = r.diagnoses
    assert d.kind == "nonfinite_grad" and d.kinks[0]["op"] == "sqrt" and d.kinks[0]["line"] == 3
    assert d.kinks[0]["convention"] == conventions.CONVENTIONS["sqrt"].words
    assert conventions.CONVENTIONS["sqrt"].words in d.text
    assert r.to_dict()["diagnoses"][0]["kinks"] == d.kinks
