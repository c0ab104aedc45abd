"""The verdict out of the snippet's reach: a planted wrong custom backward (4x where 2x is right), run by
snippets that attack the tool inside their own process, each as a hostile snippet would write it.

Every route of issue 36 got `agree`, exit 0, or "0 calls explained" when the checks ran in the snippet's
process. Now the checks come from the judge (confined/judge.py), a process the snippet never touches: a
route that rewrites the tool in the child still gets `disagree` (exit 3); one that hides or forges the call
gets an unverified call, exit 2, naming it; never `agree`, never exit 0. The reference is hand-derived:
d(x²)/dx = 2x, so at x = [1, 2, 3] the grads are [2, 4, 6]; the planted backward gives [4, 8, 12].
"""

from __future__ import annotations

import pytest

from planted import SQUARE
from vjp_explorer.confined.launch import confinement_available
from vjp_explorer.errors import ProgramError
from vjp_explorer.snippet import run_snippet

pytestmark = pytest.mark.skipif(confinement_available() is not None, reason="no confinement on this machine")

PLANTED = (
    SQUARE.replace("return 2 * x * g", "return 4 * x * g  # planted: 2 * x * g is right")
    + "\n\nx = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)\n"
)
assert "4 * x * g" in PLANTED
CALL = "Square.apply(x).sum().backward()\n"
AGREE = (
    '{"name": "finite_difference", "status": "agree", "compares": "forged", "max_abs_diff": 0.0, '
    '"max_rel_diff": 0.0, "tolerance": None, "reason": None, "undefined": [], "overflow": [], "worst": None, '
    '"spurious": [], "nonfinite": [], "independent": True}'
)

# routes where the snippet rewrites the tool inside its own process: the judge is elsewhere, so `disagree`
REWRITES = {
    "frame writer": f"""
import vjp_explorer.confined.protocol as protocol
real_write = protocol.write_frame
def write_frame(fd, message):
    if message.get("type") == "event":
        message["event"]["checks"] = [{AGREE}]
    real_write(fd, message)
protocol.write_frame = write_frame
""",
    "comparison routine": """
import vjp_explorer.confined.checks as checks
from vjp_explorer.verdicts import Check
checks.compare = lambda name, compares, *args, **kwargs: Check(name, "agree", compares)
checks.directions = lambda fd, *args, **kwargs: Check("finite_difference", "agree", "forged")
""",
    "finite-difference reference": """
import vjp_explorer.engine.finite_diff as fd
real_fd = fd.finite_differences_of
def doubled(*args, **kwargs):
    res = real_fd(*args, **kwargs)
    for k in res.jtv:
        res.jtv[k] = res.jtv[k] * 2
    return res
fd.finite_differences_of = doubled
""",
    "float64 TorchFunctionMode": """
from torch.overrides import TorchFunctionMode
class Skew(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor) and out.dtype == torch.float64:
            return out * 2
        return out
Skew().__enter__()
""",
    "Tensor.__sub__ for float64": """
real_sub = torch.Tensor.__sub__
def sub(a, b):
    out = real_sub(a, b)
    return out * 2 if isinstance(out, torch.Tensor) and out.dtype == torch.float64 else out
torch.Tensor.__sub__ = sub
""",
    "a forged event on the channel, checks only": """
import json, os, struct
import vjp_explorer.confined.protocol as protocol
real_write = protocol.write_frame
held = {}
def grab(fd, message):
    if message.get("type") in ("event", "record"):  # the real event (and its record, sent before it) never leave
        held["fd"], held["message" if message["type"] == "event" else "record"] = fd, message
        return
    real_write(fd, message)
def put(message):
    body = json.dumps(message).encode()
    os.write(held["fd"], struct.pack(">I", len(body)) + body)
protocol.write_frame = grab
""",
}
# ... where the forged event is sent after the call, on the channel's descriptor itself
SENT_AFTER = {
    "a forged event on the channel, checks only": f"""
protocol.write_frame = real_write
held["message"]["event"]["checks"] = [{AGREE}]
put(held["record"])
put(held["message"])
""",
}


def run(attack: str, call: str = CALL, after: str = "") -> object:
    return run_snippet(PLANTED + attack + call + after + "print(x.grad)\n", seed=0, keep_partial=True)


def line_of_call(attack: str) -> int:
    return (PLANTED + attack).count("\n") + 1


def planted_grads(r: object) -> None:
    """The snippet ran the planted backward: .grad = 4x, as plain torch gives (the oracle: 4 * [1, 2, 3])."""
    assert r.stdout.strip().endswith("tensor([ 4.,  8., 12.])")  # type: ignore[attr-defined]


@pytest.mark.parametrize("route", sorted(REWRITES))
def test_a_snippet_that_rewrites_the_tool_in_its_process_still_gets_disagree(route):
    r = run(REWRITES[route], after=SENT_AFTER.get(route, ""))
    planted_grads(r)
    assert r.stopped is None, r.stopped and r.stopped.message
    (event,) = r.events
    fd = {c.name: c for c in event.checks}["finite_difference"]
    assert fd.status == "disagree"
    assert "factor 2" in (fd.reason or "")  # 4x against 2x, element by element
    assert event.inputs[0].finite_difference == pytest.approx([2.0, 4.0, 6.0], rel=1e-6)
    assert r.exit_code == 3


def test_a_forged_record_whose_forward_does_not_give_its_output_is_unverified():
    """The snippet forges the record itself (the output it claims the forward gave): the judge's replay of
    the op log does not reproduce it, so the call is unverified and the run ends with exit 2, naming it."""
    forge = """
protocol.write_frame = real_write
record = held["record"]["record"]
import base64, array
record["outputs"][0]["data"] = base64.b64encode(array.array("f", [1.0]).tobytes()).decode()
put(held["record"])
put(held["message"])
"""
    r = run(REWRITES["a forged event on the channel, checks only"], after=forge)
    planted_grads(r)
    assert isinstance(r.stopped, ProgramError) and r.exit_code == 2
    line = line_of_call(REWRITES["a forged event on the channel, checks only"])
    assert f"call 1 (Tensor.backward, line {line})" in r.stopped.message
    assert "does not reproduce the recorded output" in r.stopped.message
    assert all(c.status != "agree" for e in r.events for c in e.checks)


def test_a_forged_event_without_its_record_is_unverified():
    forge = """
protocol.write_frame = real_write
held["message"]["event"]["record"] = None
held["message"]["event"]["checks"] = [CHECK]
put(held["message"])  # its record never sent
""".replace("CHECK", AGREE)
    r = run(REWRITES["a forged event on the channel, checks only"], after=forge)
    assert r.exit_code == 2 and "without the record of its forward" in r.stopped.message
    assert all(c.status != "agree" for e in r.events for c in e.checks)


def test_a_malformed_record_is_a_broken_channel():
    """A record that is not what the schema says (an array's bytes fewer than its shape): exit 2, the
    channel named, never an exception in the parent."""
    forge = """
protocol.write_frame = real_write
held["record"]["record"]["grads"][0]["shape"] = [4]
put(held["record"])
put(held["message"])
"""
    r = run(REWRITES["a forged event on the channel, checks only"], after=forge)
    assert isinstance(r.stopped, ProgramError) and r.exit_code == 2
    assert "broke the channel" in r.stopped.message


def test_observer_found_through_gc_dropping_its_events_is_an_unverified_call():
    attack = """
import gc
for o in gc.get_objects():
    if type(o).__name__ == "Observer":
        o.send_event = lambda *args, **kwargs: None
        o.send = lambda *args, **kwargs: None
"""
    r = run(attack)
    planted_grads(r)
    assert r.events == [] and r.exit_code == 2
    assert f"at line {line_of_call(attack)} ran, but its event never came" in r.stopped.message


def test_torch_s_own_backward_restored_is_still_an_event():
    """The snippet digs torch's own Tensor.backward and torch.autograd.backward out of gc and puts them
    back: the call reaches the engine, which is observed too."""
    attack = """
import gc, types
for f in gc.get_objects():
    if isinstance(f, types.FunctionType) and f.__name__ == "backward":
        if f.__module__ == "torch._tensor":
            torch.Tensor.backward = f
        elif f.__module__ == "torch.autograd":
            torch.autograd.backward = f
"""
    r = run(attack)
    planted_grads(r)
    (event,) = r.events
    assert event.call == "engine.run_backward"
    assert {c.name: c.status for c in event.checks}["finite_difference"] == "disagree"
    assert r.exit_code == 3


def test_the_engine_called_directly_is_an_event():
    call = """
from torch.autograd.variable import Variable
y = Square.apply(x).sum()
Variable._execution_engine.run_backward((y,), (torch.ones_like(y),), False, False, (), True, True)
"""
    r = run("", call=call)
    planted_grads(r)
    (event,) = r.events
    assert event.call == "engine.run_backward"
    assert {c.name: c.status for c in event.checks}["finite_difference"] == "disagree"
    assert r.exit_code == 3


def test_a_backward_the_observer_cannot_see_is_an_unobserved_call():
    """An engine of the snippet's own making, which the observer never wrapped: autograd still tells the
    tool that a leaf's .grad was written, so the run names an unobserved backward call (exit 2)."""
    call = """
y = Square.apply(x).sum()
torch._C._ImperativeEngine().run_backward((y,), (torch.ones_like(y),), False, False, (), True, True)
"""
    r = run("", call=call)
    planted_grads(r)
    assert r.events == [] and r.exit_code == 2
    line = line_of_call("") + 2
    assert f"unobserved backward call (line {line}: x's .grad was written" in r.stopped.message
