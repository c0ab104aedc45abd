"""The tool never changes the snippet's state or flow, and its float64 references are float64.

Each snippet runs twice: under the observer, and as plain Python (the oracle); what the snippet can see
afterwards (a global its function writes, a list it fills, the next random number) must be the same.
"""

from __future__ import annotations

import ast
import warnings

import pytest
import torch

from test_confined_observe import checks, observe
from vjp_explorer.confined.record import Recorder


def plain(src: str) -> dict:
    """The snippet as `python FILE.py` runs it: no observer."""
    ns: dict = {"__name__": "__main__"}
    for stmt in ast.parse(src).body:
        exec(compile(ast.Module([stmt], []), "<plain>", "exec"), ns)
    return ns


JVP_CONSTANT = """
import torch
c = torch.tensor([0.1, 0.7, 1.3])
def f(x):
    return c * x + x * x
out, jv = torch.func.jvp(f, (torch.tensor(0.3),), (torch.tensor(1.0),))
"""


JVP_WARNS = pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")  # torch's own


@JVP_WARNS
def test_a_float32_constant_inside_a_jvp_d_function_runs_in_float64_for_the_reference():
    """x has no dimensions, so the float32 constant c wins type promotion over a float64 x: unless c is
    widened too, the differences run in float32 and this exact JVP is called wrong."""
    (event,), ns = observe(JVP_CONSTANT)
    c, x = torch.tensor([0.1, 0.7, 1.3]).double(), torch.tensor(0.3).double()  # the float32 numbers, exactly
    (ref,) = event["reference"]
    assert ref["values"] == pytest.approx((c + 2 * x).tolist(), rel=1e-9)  # float32 differences: 1e-4
    assert checks(event) == {"finite_difference": "agree"}
    assert ns["c"].dtype == torch.float32 and ns["c"] is ns["f"].__globals__["c"]  # restored, the same tensor


MODULE_CONSTANT = """
import torch
torch.manual_seed(0)
lin = torch.nn.Linear(3, 2)
def f(x):
    return lin(x * torch.ones(3))
jv = torch.func.jvp(f, (torch.tensor(0.5),), (torch.tensor(1.0),))[1]
"""


@JVP_WARNS
def test_a_module_s_parameters_are_widened_for_the_reference_and_restored():
    (event,), ns = observe(MODULE_CONSTANT)
    w = ns["lin"].weight.detach().double()
    (ref,) = event["reference"]
    assert ref["values"] == pytest.approx(w.sum(1).tolist(), rel=1e-9)
    assert ns["lin"].weight.dtype == torch.float32 and ns["lin"].weight.requires_grad
    assert checks(event) == {"finite_difference": "agree"}


WRITES = """
import torch
from torch.func import grad
torch.manual_seed(0)
last = None
seen = []
calls = 0
def f(x):
    global last, calls
    y = (x ** 3).sum() + torch.rand(()) * 0
    last = y
    seen.append(y.shape)
    calls += 1
    return y
g = grad(f)(torch.tensor([1.0, 2.0]))
after = torch.rand(3)
"""


def test_after_grad_f_a_global_f_writes_holds_what_python_leaves_there():
    (event,), ns = observe(WRITES)
    want = plain(WRITES)
    # the reference did run f many times, and the judge's record once more (the judge's checks: jtv too)
    assert checks(event) == {"jtv": "agree", "finite_difference": "agree"}
    assert type(ns["last"]) is type(want["last"]) and repr(ns["last"]) == repr(want["last"])
    assert ns["seen"] == want["seen"] and ns["calls"] == want["calls"] == 1
    assert torch.equal(ns["after"], want["after"])  # the random stream goes on where Python's does
    assert ns["g"].tolist() == pytest.approx([3.0, 12.0])


IN_PLACE = """
import torch
torch.manual_seed(0)
bn = torch.nn.BatchNorm1d(3)
lin = torch.nn.Linear(3, 3)
x = torch.randn(5, 3)
seen = torch.zeros(())
def f(t):
    seen.add_(1)
    return bn(lin(t)).tanh()
_, a = torch.autograd.functional.jvp(f, x, torch.ones(5, 3))
_, b = torch.autograd.functional.vjp(f, x, torch.ones(5, 3))
"""


def test_what_the_re_runs_write_in_place_holds_what_python_leaves_there():
    """The references and the judge's record run f again and again: a BatchNorm's running statistics (its
    kernel writes them without a new version) and a counter the function adds to are put back."""
    events, ns = observe(IN_PLACE)
    want = plain(IN_PLACE)
    assert [checks(e)["finite_difference"] for e in events] == ["agree", "agree"]
    assert int(ns["seen"]) == int(want["seen"]) == 2
    assert int(ns["bn"].num_batches_tracked) == int(want["bn"].num_batches_tracked) == 2
    assert torch.equal(ns["bn"].running_mean, want["bn"].running_mean)
    assert torch.equal(ns["bn"].running_var, want["bn"].running_var)


INFERENCE = """
import torch
with torch.inference_mode():
    scale = torch.tensor([2.0, 3.0])
w = torch.tensor([1.0, 1.0], requires_grad=True)
y = (w + scale).pow(2).sum()
y.backward()
done = w.grad * 1
"""


def test_a_tensor_made_under_inference_mode_is_recorded_and_the_snippet_runs_on():
    (event,), ns = observe(INFERENCE)
    assert ns["done"].tolist() == [6.0, 8.0]  # 2(w + scale)
    assert checks(event) == {"jtv": "agree", "finite_difference": "agree"}


def test_a_failure_of_the_log_itself_never_becomes_the_snippet_s_error(monkeypatch):
    def broken(self, *args):
        raise RuntimeError("an unusual layout")

    monkeypatch.setattr(Recorder, "_log", broken)
    (event,), ns = observe(INFERENCE)
    assert ns["done"].tolist() == [6.0, 8.0]
    (check,) = event["checks"]
    assert (
        check["status"] == "skipped" and "could not record" in check["reason"] and "unusual layout" in check["reason"]
    )


SPARSE = """
import torch
s = torch.sparse_coo_tensor(torch.tensor([[0, 2]]), torch.tensor([1.0, 2.0]), (3,), requires_grad=True)
d = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
(s.to_dense() * d).sum().backward()
m = torch.sparse_coo_tensor(torch.tensor([[0, 1], [1, 0]]), torch.tensor([1.0, 2.0]), (2, 2))
v = torch.tensor([[1.0], [2.0]], requires_grad=True)
torch.sparse.mm(m, v).sum().backward()
"""


def test_backward_through_a_sparse_leaf_is_an_event_and_a_sparse_constant_is_checked():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (leaf, const), ns = observe(SPARSE)
    assert {x["name"]: x["grad"] for x in leaf["inputs"]} == {"s": [1.0, 0.0, 3.0], "d": [1.0, 0.0, 2.0]}
    (check,) = leaf["checks"]
    assert check["status"] == "skipped" and "sparse leaf" in check["reason"]
    assert const["inputs"][0]["grad"] == [[2.0], [1.0]]  # column sums of m
    assert checks(const) == {"jtv": "agree", "finite_difference": "agree"}
