"""The call record's schema (calls.py) and the judge's reading of it (confined/oplog.py, verdict.py).

A record is what a snippet's process says about one backward call; it may be forged. The schema refuses
anything that is not what it says before anything reads it; the judge resolves operators in torch's own
namespaces only, and refuses sizes past its budget before it allocates. Real records come from the
observer run here on small snippets; each is sent through JSON as the channel sends it.
"""

from __future__ import annotations

import copy
import json

import pytest

from test_confined_observe import observe
from vjp_explorer.calls import RecordError, validate_event
from vjp_explorer.confined.judging import _skipped, merge
from vjp_explorer.confined.verdict import verdict

SRC = """
import torch
x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
w = torch.tensor([[0.5, -1.0, 2.0]], requires_grad=True)
y = (w @ torch.sin(x * x)).sum()
y.backward()
"""


@pytest.fixture(scope="module")
def event() -> dict:
    (e,), _ = observe(SRC, judge=False)
    return json.loads(json.dumps(e))  # as the channel carries it


def fresh(event: dict) -> dict:
    return copy.deepcopy(event)


def test_a_real_record_passes_and_the_judge_checks_it_against_hand_derived_grads(event):
    import math

    e = validate_event(fresh(event))
    assert merge(e, verdict(e)) is None
    assert {c["name"]: c["status"] for c in e["checks"]} == {"jtv": "agree", "finite_difference": "agree"}
    # d/dx_j of Σ w_j sin(x_j²) = w_j cos(x_j²) 2 x_j; d/dw_j = sin(x_j²)
    xs, ws = [1.0, 2.0, 3.0], [0.5, -1.0, 2.0]
    fd_x = e["inputs"][0]["finite_difference"]
    assert fd_x == pytest.approx([w * math.cos(x * x) * 2 * x for x, w in zip(xs, ws, strict=True)], rel=1e-6)
    assert e["inputs"][1]["finite_difference"][0] == pytest.approx([math.sin(x * x) for x in xs], rel=1e-6)


def test_the_judge_ignores_the_checks_a_snippet_s_process_sends(event):
    e = fresh(event)
    e["checks"] = [{**_check(), "status": "agree", "name": "finite_difference"}]
    e["record"]["grads"][0] = e["record"]["at"][0]  # grads = x, which the forward cannot give
    validate_event(e)
    merge(e, verdict(e))
    assert {c["name"]: c["status"] for c in e["checks"]} == {"jtv": "disagree", "finite_difference": "disagree"}


def _check() -> dict:
    return {**_skipped(""), "name": "jtv", "status": "agree", "compares": ""}


def _set(path: str, value: object):
    def change(e: dict) -> None:
        *head, last = path.split(".")
        at: object = e
        for part in head:
            at = at[int(part)] if isinstance(at, list) else at[part]  # type: ignore[index]
        if isinstance(at, list):
            at[int(last)] = value
        else:
            at[last] = value  # type: ignore[index]

    return change


MALFORMED = {
    "an unknown field": lambda e: e.update(extra=1),
    "a field missing": lambda e: e.pop("notes"),
    "a line that is text": _set("line", "7"),
    "a bool for a number": _set("index", True),
    "a negative dimension": _set("inputs.0.shape", [-1]),
    "values nested past any tensor": _set("inputs.0.value", json.loads("[" * 20 + "1.0" + "]" * 20)),
    "a check with an unknown status": _set("checks", [{**_check(), "status": "fine"}]),
    "an array's bytes fewer than its shape": _set("record.grads.0.shape", [4]),
    "an array that is not base64": _set("record.at.0.data", "!!!!"),
    "an array of an unknown dtype": _set("record.at.0.dtype", "object"),
    "an operator name that is code": _set("record.forward.ops.0.0", "__import__('os').system('id')"),
    "a size no forward may allocate": _set("record.forward.ops.0.1", [[100_000, 100_000, 100_000]]),
    "a reference with a text key": _set("record.forward.ops.0.1.0", {"ref": ["1", 0], "made": True}),
    "an enum the judge does not know": _set("record.forward.ops.0.2", {"dtype": {"dtype": "object"}}),
    "grads that do not line up with the inputs": _set("record.grads", []),
    "a kink whose line is text": _set(
        "kinks", [{"op": "relu", "line": "3", "input": "", "elements": [], "count": 0, "convention": ""}]
    ),
    "a kink with an unknown key": _set(
        "kinks", [{"op": "relu", "line": 3, "input": "", "elements": [], "count": 0, "convention": "", "script": "x"}]
    ),
    "a graph node with an unknown key": _set(
        "graph",
        [
            {
                "id": 0,
                "name": "SumBackward0",
                "leaf": None,
                "value_of": None,
                "line": 1,
                "source": None,
                "ran": True,
                "arriving": None,
                "edges": [],
                "script": "x",
            }
        ],
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_record_is_refused_before_anything_reads_it(event, case):
    e = fresh(event)
    MALFORMED[case](e)
    with pytest.raises(RecordError):
        validate_event(e)


def test_nan_and_inf_pass_as_json_s_own_tokens(event):
    e = fresh(event)
    e["inputs"][0]["grad"] = [float("nan"), float("inf"), -float("inf")]
    validate_event(json.loads(json.dumps(e)))


def _op(e: dict, name: str) -> dict:
    """The event with every operator of its forward renamed to `name`."""
    for op in e["record"]["forward"]["ops"]:
        op[0] = name
    return e


def test_an_operator_the_snippet_registered_is_skipped_with_why(event):
    e = validate_event(_op(fresh(event), "mylib::twice"))
    assert merge(e, verdict(e)) is None
    (check,) = e["checks"]
    assert check["status"] == "skipped"
    assert "mylib::twice, an operator the snippet registered" in check["reason"]


def test_a_name_outside_torch_s_namespaces_is_never_resolved(event):
    """`builtins::eval` has the shape of an operator's name; the judge looks names up in torch.ops.aten and
    torch.ops.prims only, so it is a foreign operator, skipped, never a function found elsewhere."""
    e = validate_event(_op(fresh(event), "builtins::eval"))
    merge(e, verdict(e))
    assert e["checks"][0]["status"] == "skipped" and "builtins::eval" in e["checks"][0]["reason"]


def test_a_size_past_the_budget_is_refused_before_it_allocates(event):
    e = fresh(event)
    e["record"]["forward"]["ops"].insert(0, ["aten::zeros", [[20_000, 20_000]], {}, [[999, 0]], None])
    validate_event(e)
    merge(e, verdict(e))
    (check,) = e["checks"]
    assert check["status"] == "skipped" and "budget" in check["reason"]


def test_a_reference_to_nothing_is_an_unverified_call(event):
    e = fresh(event)
    e["record"]["forward"]["ops"][0][1][0] = {"ref": [987654, 0], "made": True}
    validate_event(e)
    why = merge(e, verdict(e))
    assert why is not None and "reads a value no earlier operation of the log made" in why
    assert all(c["status"] != "agree" for c in e["checks"])
