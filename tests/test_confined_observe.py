"""The observer of the confined child, run here in the test process on trusted test snippets.

Each backward/grad call becomes one event; its checks come from the recorded forward replayed in float64.
The numbers are checked against hand-derived values and against plain torch running the same code.
"""

from __future__ import annotations

import ast
import linecache

import pytest
import torch

from vjp_explorer.calls import validate_event
from vjp_explorer.confined.judging import merge, paired
from vjp_explorer.confined.observe import Observer
from vjp_explorer.confined.record import Recorder, serial
from vjp_explorer.confined.verdict import verdict

NAME = "<observed snippet>"


def observe(src: str, judge: bool = True) -> tuple[list[dict], dict]:
    """Run `src` statement by statement under an installed Observer; torch is restored afterwards. Each
    event is judged as the parent would have it judged (`judge=False`: as the child sent it, its record)."""
    from vjp_explorer.magic import put_back, torch_attributes

    before = torch_attributes()  # all of torch the observer may patch (functional's wrappers included)
    linecache.cache[NAME] = (len(src), None, src.splitlines(True), NAME)
    ns: dict = {"__name__": "__main__"}
    events: list[dict] = []
    ob = Observer(events.append, NAME, ns)
    ob.install()
    try:
        for stmt in ast.parse(src).body:
            exec(compile(ast.Module([stmt], []), NAME, "exec"), ns)
    finally:
        ob.recorder.__exit__(None, None, None)
        put_back(before)
    return [judged(e) if judge else e for e in paired(events)], ns  # each event with its record frame


def judged(event: dict) -> dict:
    """The event as the parent keeps it: checked against the schema, its checks the judge's (run here)."""
    validate_event(event)
    merge(event, verdict(event) if event["record"] is not None else None)
    return event


def checks(event: dict) -> dict[str, str]:
    return {c["name"]: c["status"] for c in event["checks"]}


SEED = """
import torch
a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
b = torch.tensor([3.0, 4.0, 5.0], requires_grad=True)
c = torch.tensor([6.0, 7.0, 8.0], requires_grad=True)
y = 3*a + 2*b*b + torch.log(c)
y.backward(torch.tensor([0.1, 1.0, 0.0001]))
"""


def test_the_seed_call_is_one_event_with_the_seed_numbers():
    events, ns = observe(SEED)
    (e,) = events
    assert e["line"] == 7 and e["source"] == "y.backward(torch.tensor([0.1, 1.0, 0.0001]))"
    assert [x["name"] for x in e["inputs"]] == ["a", "b", "c"]
    v = torch.tensor([0.1, 1.0, 0.0001]).double()  # v as the snippet made it: float32 numbers
    want = {"a": 3 * v, "b": 4 * torch.tensor([3.0, 4, 5]) * v, "c": v / torch.tensor([6.0, 7, 8])}
    for x in e["inputs"]:
        ref = want[x["name"]].tolist()
        assert x["grad"] == pytest.approx(ref, rel=1e-6)
        assert x["finite_difference"] == pytest.approx(ref, rel=1e-8)
        assert x["jtv"] == pytest.approx(ref, rel=1e-12)
    assert checks(e) == {"jtv": "agree", "finite_difference": "agree"}
    assert ns["a"].grad.tolist() == pytest.approx(want["a"].tolist(), rel=1e-6)  # the real call ran, once


@pytest.mark.parametrize(
    "mutation, changed",
    [
        ("y = x * c\nc.data.mul_(2.5)\ny.sum().backward()", "c"),  # a saved constant changed behind autograd
        ("y = x * x\nx.data.mul_(10)\ny.sum().backward()", "x"),  # the leaf itself
    ],
)
def test_a_change_through_data_after_the_forward_is_a_disagreement_named(mutation, changed):
    src = "import torch\nx = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)\nc = torch.full((3,), 2.0)\n" + mutation
    (e,) = observe(src)[0]
    assert checks(e)["finite_difference"] == "disagree"
    assert any(note.startswith(f"{changed} changed after the forward") for note in e["notes"]), e["notes"]


def test_a_wrong_custom_backward_disagrees_and_runs_once():
    src = """
import torch
calls = []
class Sq(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 2
    @staticmethod
    def backward(ctx, g):
        calls.append(1)
        (x,) = ctx.saved_tensors
        return 3 * x * g
u = torch.tensor([1.0, -2.0], requires_grad=True)
Sq.apply(u).sum().backward()
"""
    (e,), ns = observe(src)
    assert ns["calls"] == [1]  # the tool never runs the snippet's backward again
    assert checks(e)["finite_difference"] == "disagree"
    assert e["inputs"][0]["finite_difference"] == pytest.approx([2.0, -4.0], rel=1e-8)
    assert e["inputs"][0]["grad"] == [3.0, -6.0]


@pytest.mark.parametrize("factor, verdict", [(1, "agree"), (2, "disagree")])
def test_a_view_inside_a_custom_forward_is_replayed_through(factor, verdict):
    """x.mm(w.t()) in a Function's forward: the view is made without grad yet reports requires_grad (a view
    of a leaf), and must be replayed from w, not held as a constant (that read the gradient as 0)."""
    src = f"""
import torch
class MM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x.mm(w.t())
    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return None, {factor} * g.t().mm(x)
x = torch.tensor([[1.0, 2.0], [3.0, -1.0]])
w = torch.tensor([[0.5, -1.0], [2.0, 1.5]], requires_grad=True)
MM.apply(x, w).sum().backward()
"""
    (e,), _ = observe(src)
    assert checks(e) == {"jtv": verdict, "finite_difference": verdict}
    fd = e["inputs"][0]["finite_difference"]
    assert fd == [pytest.approx([4.0, 1.0], rel=1e-8)] * 2  # each row: the column sums of x


def test_a_leaf_changed_through_data_is_read_afresh_by_a_later_forward():
    """`w.data = ...` and `w.data.sub_(...)` do not bump w's version: a forward that read w before the change
    must not lend its copy to a forward after it (that made a correct gradient disagree)."""
    src = """
import torch
w = torch.tensor([1.0], requires_grad=True)
p = 4 * w
w.data = torch.tensor([3.0])
((w - 2.0) ** 2).backward()
w.data.sub_(0.5 * w.grad)
w.grad.zero_()
((w - 2.0) ** 2).backward()
"""
    events, ns = observe(src)
    assert [checks(e) for e in events] == [{"jtv": "agree", "finite_difference": "agree"}] * 2
    assert [e["inputs"][0]["finite_difference"] for e in events] == [[pytest.approx(2.0)], [pytest.approx(0.0)]]


def test_a_folded_call_allows_the_forward_s_float32_rounding():
    """A float32 residual that cancels (w near its optimum): the cheap directional check of a folded call
    allows how far the forward's own rounding moves the grads, as the full check does."""
    src = """
import torch
w = torch.tensor([1.0], requires_grad=True)
for epoch in range(100):
    for x, y in ((1.0, 2.0), (2.0, 4.0), (3.0, 6.0)):
        l = (x * w - y) ** 2
        l.backward()
        w.data = w.data - 0.01 * w.grad.data
        w.grad.data.zero_()
"""
    events, _ = observe(src)
    statuses = {c["status"] for e in events for c in e["checks"] if c["name"] == "finite_difference"}
    assert statuses == {"agree", "skipped"} and len(events) == 300


HOOKED = {
    "tensor hook in place": "x.register_hook(lambda g: g.mul_(2))\n(x * x).sum().backward()",
    "tensor hook clamp_": "x.register_hook(lambda g: g.clamp_(-1, 1))\n(x * x).sum().backward()",
    "node hook": "y = x.exp()\ny.grad_fn.register_hook(lambda gi, go: (gi[0] * 2,))\ny.sum().backward()",
    "node prehook": "y = x * x\ny.grad_fn.register_prehook(lambda go: (go[0] * 10,))\ny.sum().backward()",
    "module hook": "m = torch.nn.Tanh()\nm.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 0.5,))\n"
    "m(x).sum().backward()",
    "every module's hook": "from torch.nn.modules.module import register_module_full_backward_hook as every\n"
    "h = every(lambda mod, gi, go: (gi[0] * 5,))\ntorch.nn.Tanh()(x).sum().backward()\nh.remove()",
    "lossy saved tensors": "with torch.autograd.graph.saved_tensors_hooks(lambda t: t.round(), lambda t: t):\n"
    "    y = (x * 1.3) ** 2\ny.sum().backward()",
    "post-accumulate step": "opt = torch.optim.SGD([x], lr=0.1)\n"
    "x.register_post_accumulate_grad_hook(lambda p: [opt.step(), opt.zero_grad()] and None)\n(x * x).sum().backward()",
}


@pytest.mark.parametrize("case", sorted(HOOKED))
def test_every_kind_of_hook_that_changes_a_gradient_is_by_design(case):
    """A gradient a hook changes (returned, or in place) is the snippet's design: skipped with a note naming
    the kind of hook, never a disagreement; a hook that only looks agrees."""
    (e,), _ = observe(f"import torch\nx = torch.tensor([2.0, -3.0], requires_grad=True)\n{HOOKED[case]}\n")
    assert "disagree" not in checks(e).values() and "skipped" in checks(e).values()
    assert any("A hook of the snippet" in n for n in e["notes"])
    (e,), _ = observe(
        "import torch\nx = torch.tensor([2.0, -3.0], requires_grad=True)\nseen = []\n"
        "x.register_hook(lambda g: seen.append(g.sum()))\ny = x * x\n"
        "y.grad_fn.register_hook(lambda gi, go: None)\ny.sum().backward()\n"
    )
    assert checks(e) == {"jtv": "agree", "finite_difference": "agree"}


def test_a_sparse_gradient_is_explained_and_stays_sparse_for_the_snippet():
    src = """
import torch
emb = torch.nn.Embedding(10, 3, sparse=True)
emb(torch.tensor([1, 2, 1])).sum().backward()
layout = emb.weight.grad.layout
"""
    (e,), ns = observe(src)
    assert ns["layout"] == torch.sparse_coo  # what the snippet sees is torch's own
    assert checks(e) == {"jtv": "agree", "finite_difference": "agree"}
    assert e["inputs"][0]["grad"][1] == [2.0, 2.0, 2.0] and any("sparse" in n for n in e["notes"])


def test_a_call_the_tool_cannot_read_back_runs_and_says_so(monkeypatch):
    """The tool's own failure after the real call is an event that says so, never the snippet's exception."""
    import vjp_explorer.confined.observe as observe_module

    def broken(*args, **kwargs):
        raise RuntimeError("planted")

    monkeypatch.setattr(observe_module, "delta", broken)  # read after the real call
    (e,), ns = observe("import torch\nx = torch.ones(2, requires_grad=True)\n(x * 3).sum().backward()\ng = x.grad\n")
    assert ns["g"].tolist() == [3.0, 3.0]
    assert e["checks"][0]["status"] == "skipped" and "could not read this call back" in e["checks"][0]["reason"]


def test_inputs_the_replay_does_not_read_and_higher_derivatives_are_checked():
    """grad at a non-leaf (autograd cuts the graph there) and an unused input (allow_unused) are checked;
    a gradient of a gradient too: the replay recomputes the create_graph gradient from its input."""
    src = """
import torch
a = torch.tensor([1.0, 2.0], requires_grad=True)
b = torch.tensor([3.0], requires_grad=True)
x = a.clone()
g1, = torch.autograd.grad((x ** 2).sum(), x)
g2, unused = torch.autograd.grad((a ** 2).sum(), [a, b], allow_unused=True)
d, = torch.autograd.grad((a ** 3).sum(), a, create_graph=True)
dd, = torch.autograd.grad(d.sum(), a)
"""
    events = observe(src)[0]
    assert [checks(e) for e in events] == [{"jtv": "agree", "finite_difference": "agree"}] * 4
    assert events[3]["inputs"][0]["finite_difference"] == pytest.approx([6.0, 12.0])  # d(Σ3a²)/da = 6a


def test_calls_from_the_snippet_s_threads_are_each_an_event():
    src = """
import threading, torch
def work():
    x = torch.ones(3, requires_grad=True)
    for _ in range(5):
        (x * 2).sum().backward()
threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""
    events, _ = observe(src)
    assert len(events) == 20
    reasons = {c["reason"] for e in events for c in e["checks"] if c["status"] == "skipped"}
    assert all("another thread" in r or "every 10th" in r for r in reasons)


def test_an_op_without_a_float64_kernel_keeps_the_jtv_check():
    """LSTM on CPU runs mkldnn_rnn_layer, which has no float64 kernel: the replay runs it in float32, enough
    for J (a consistency check), too coarse for finite differences, which say so instead of disagreeing."""
    src = """
import torch
torch.manual_seed(0)
lstm = torch.nn.LSTM(2, 3, batch_first=True)
out, _ = lstm(torch.randn(1, 2, 2))
out.sum().backward()
"""
    (e,), _ = observe(src)
    fd = next(c for c in e["checks"] if c["name"] == "finite_difference")
    assert checks(e)["jtv"] == "agree"
    assert fd["status"] == "agree" or (fd["status"] == "skipped" and "no float64 kernel" in fd["reason"])


def test_detach_and_no_grad_are_constants_to_the_replay():
    src = """
import torch
x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
with torch.no_grad():
    m = x.mean()
w = (x - m).sum() + (x * x.detach()).sum()
w.backward()
"""
    (e,) = observe(src)[0]
    assert e["inputs"][0]["finite_difference"] == pytest.approx([2.0, 3.0, 4.0], rel=1e-8)  # 1 + x
    assert checks(e) == {"jtv": "agree", "finite_difference": "agree"}


def test_dropout_replays_its_recorded_mask():
    src = """
import torch
torch.manual_seed(0)
x = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
y = torch.nn.functional.dropout(x * x, 0.5).sum()
y.backward()
"""
    (e,), ns = observe(src)
    assert checks(e) == {"jtv": "agree", "finite_difference": "agree"}
    assert e["inputs"][0]["finite_difference"] == pytest.approx(ns["x"].grad.tolist(), rel=1e-7)


def test_autograd_grad_and_a_module_are_named_as_written():
    src = """
import torch
torch.manual_seed(0)
net = torch.nn.Linear(3, 2)
x = torch.randn(4, 3)
loss = net(x).pow(2).mean()
gw, gb = torch.autograd.grad(loss, [net.weight, net.bias])
"""
    (e,), ns = observe(src)
    assert e["call"] == "torch.autograd.grad" and [x["name"] for x in e["inputs"]] == ["net.weight", "net.bias"]
    w, b = ns["net"].weight.detach(), ns["net"].bias.detach()
    ref_w, ref_b = torch.func.grad(lambda w, b: (ns["x"] @ w.T + b).pow(2).mean(), argnums=(0, 1))(w, b)
    assert torch.tensor(e["inputs"][0]["grad"]) == pytest.approx(ref_w, rel=1e-5)
    assert e["inputs"][1]["finite_difference"] == pytest.approx(ref_b.tolist(), rel=1e-5)
    assert checks(e) == {"jtv": "agree", "finite_difference": "agree"}


def test_a_training_loop_gives_one_event_a_step_and_keeps_no_old_forward():
    src = """
import torch
torch.manual_seed(0)
w = torch.zeros(3, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)
x, t = torch.randn(8, 3), torch.randn(8)
for step in range(20):
    opt.zero_grad()
    loss = ((x @ w - t) ** 2).mean()
    loss.backward()
    opt.step()
"""
    events, ns = observe(src)
    assert len(events) == 20 and {e["line"] for e in events} == {10}
    # the first three in full, then every tenth along random directions; the others say why not
    verdicts = [checks(e)["finite_difference"] for e in events]
    assert [k for k, s in enumerate(verdicts) if s == "agree"] == [0, 1, 2, 12]
    assert all(s == "skipped" for k, s in enumerate(verdicts) if k not in (0, 1, 2, 12))
    assert "jtv" not in checks(events[12]) or checks(events[12])["jtv"] == "skipped"


def test_the_recorder_forgets_consumed_forwards():
    rec = Recorder()
    x = torch.ones(3, requires_grad=True)
    with rec:
        for _ in range(50):
            y = (x * 2).sum()
            rec.forget(rec.slice_for([y], [x]))
    assert rec.entries == [] and rec.copies == {}
    assert serial(x) == serial(x)


def test_a_mistake_pattern_is_claimed_only_where_it_is_one():
    from vjp_explorer.confined.pattern import mistake_pattern

    factor = mistake_pattern(torch.tensor([[2.0, 4.0, 6.0], [1.0, 2.0, 3.0]]))
    assert factor == "every element is off by the same factor 2"
    assert "sign is flipped" in mistake_pattern(torch.tensor([[-1.0, -2.0], [1.0, 2.0]]))
    assert mistake_pattern(torch.tensor([[3.0, 4.0], [1.0, 2.0]])) == "every element is off by the same amount 2"
    # a lossy saved-tensor hook: ratios 0.999876, 0.999895, 0.99938 are rounding, not one factor
    assert mistake_pattern(torch.tensor([[0.999876, 0.999895, 0.99938], [1.0, 1.0, 1.0]])) is None


def test_observing_leaves_every_torch_attribute_as_it_was():
    # once, the functional wrappers (forward_ad's unpack_dual among them) stayed: each observed snippet in
    # this process wrapped them again, and a later program's forward-mode check ran 18 nested observers
    import torch.autograd.forward_ad as fwad

    was = (fwad.unpack_dual, fwad.make_dual, torch.func.vjp, torch.autograd.functional.jacobian, torch.vmap)
    observe("import torch\nx = torch.ones(2, requires_grad=True)\n(x * 3).sum().backward()\n")
    assert (fwad.unpack_dual, fwad.make_dual, torch.func.vjp, torch.autograd.functional.jacobian, torch.vmap) == was
