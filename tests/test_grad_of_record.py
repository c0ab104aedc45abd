"""A create_graph gradient in the call record (record.GradOf as calls.GRAD_OF) and a sparse constant, as
the judge's process receives them: through JSON, checked by the schema, rebuilt by oplog.rebuild.

The MAML oracle is test_second_order's, derived by hand; the forged records are the real ones with one
field changed, so each test fails if the judge stops reading that field or reads it without checking it.
"""

from __future__ import annotations

import copy
import json
import warnings

import pytest

from test_confined_observe import observe
from test_second_order import MAML, _by_hand
from test_snippet_state import SPARSE
from vjp_explorer.calls import GRAD_OF, MAX_GRAD_DEPTH, RecordError, validate_event
from vjp_explorer.confined.judging import merge
from vjp_explorer.confined.verdict import verdict


@pytest.fixture(scope="module")
def outer() -> dict:
    """The MAML step's outer call as the channel carries it (its forward reads the inner gradient)."""
    _inner, outer = observe(MAML, judge=False)[0]
    return json.loads(json.dumps(outer))


@pytest.fixture(scope="module")
def sparse() -> dict:
    """`torch.sparse.mm(m, v).sum().backward()` with m a sparse COO constant, as the channel carries it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _leaf, const = observe(SPARSE, judge=False)[0]
    return json.loads(json.dumps(const))


def grad_op(e: dict) -> list:
    (op,) = [op for op in e["record"]["forward"]["ops"] if op[0] == GRAD_OF]
    return op


def checks(e: dict) -> dict[str, str]:
    return {c["name"]: c["status"] for c in e["checks"]}


def test_the_maml_record_crosses_json_and_the_judge_differentiates_through_its_gradient(outer):
    e = validate_event(copy.deepcopy(outer))
    fields = grad_op(e)[2]
    assert [op[0] for op in fields["forward"]["ops"]][:1] == ["aten::mv"]  # x @ w, the inner forward
    assert merge(e, verdict(e)) is None
    assert checks(e) == {"jtv": "agree", "finite_difference": "agree"}
    assert e["inputs"][0]["finite_difference"] == pytest.approx(_by_hand(), rel=1e-7)


def test_a_forged_v_of_the_inner_gradient_is_an_unverified_call(outer):
    """v scaled by 3 makes the replayed gradient, hence the replayed output, another: the record
    contradicts itself, so no check of it is a verdict."""
    e = copy.deepcopy(outer)
    v = grad_op(e)[2]["v"][0]
    v["data"] = _scaled(v, 3.0)["data"]
    validate_event(e)
    why = merge(e, verdict(e))
    assert why is not None and "does not reproduce the recorded output" in why
    assert all(c["status"] != "agree" for c in e["checks"])


def _scaled(a: dict, k: float) -> dict:
    from vjp_explorer.confined.oplog import array, tensor

    return array(tensor(a) * k)


def _nested(e: dict, depth: int) -> None:
    """The gradient's entry put inside its own forward, `depth` times over."""
    op = grad_op(e)
    for _ in range(depth):
        inner = copy.deepcopy(op)
        op[2]["forward"]["ops"].append(inner)
        op = inner


MALFORMED = {
    "a gradient nested past the deepest the judge rebuilds": lambda e: _nested(e, MAX_GRAD_DEPTH),
    "a gradient whose input is a number": lambda e: grad_op(e)[1].__setitem__(0, 1.0),
    "a gradient with a field of its own": lambda e: grad_op(e)[2].update(code="print(1)"),
    "a gradient with a negative index": lambda e: grad_op(e)[2].__setitem__("which", [-1]),
    "a gradient with recorded random results": lambda e: grad_op(e).__setitem__(4, []),
    "a gradient whose forward has an operator that is code": lambda e: grad_op(e)[2]["forward"]["ops"][0].__setitem__(
        0, "__import__('os')"
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_gradient_is_refused_before_anything_reads_it(outer, case):
    e = copy.deepcopy(outer)
    MALFORMED[case](e)
    with pytest.raises(RecordError):
        validate_event(e)


def test_a_gradient_nested_as_deep_as_allowed_passes_the_schema(outer):
    e = copy.deepcopy(outer)
    _nested(e, MAX_GRAD_DEPTH - 1)
    validate_event(e)


MISMATCHED = {
    "an index past its inputs": lambda op: op[2].__setitem__("which", [5]),
    "no v for its output": lambda op: op[2].__setitem__("v", []),
    "an input fewer than its forward reads": lambda op: op.__setitem__(1, []),
}


@pytest.mark.parametrize("case", sorted(MISMATCHED))
def test_a_gradient_that_does_not_fit_its_forward_is_an_unverified_call(outer, case):
    e = copy.deepcopy(outer)
    MISMATCHED[case](grad_op(e))
    validate_event(e)
    why = merge(e, verdict(e))
    assert why is not None and "recorded gradient whose" in why
    assert all(c["status"] != "agree" for c in e["checks"])


def sparse_copy(e: dict) -> dict:
    (held,) = [a for _, a in e["record"]["forward"]["copies"] if "sparse_coo" in a]
    return held["sparse_coo"]


def test_a_sparse_constant_crosses_json_and_is_checked(sparse):
    e = validate_event(copy.deepcopy(sparse))
    assert sparse_copy(e)["size"] == [2, 2]
    merge(e, verdict(e))
    assert checks(e) == {"jtv": "agree", "finite_difference": "agree"}
    fd = [x for row in e["inputs"][0]["finite_difference"] for x in row]
    assert fd == pytest.approx([2.0, 1.0], rel=1e-7)  # m's column sums


def test_a_sparse_constant_whose_size_disagrees_with_its_values_is_refused(sparse):
    e = copy.deepcopy(sparse)
    sparse_copy(e)["size"] = [2, 2, 2]
    with pytest.raises(RecordError):
        validate_event(e)


def test_a_sparse_constant_indexing_past_its_size_is_an_unverified_call(sparse):
    """Indices within the schema's shapes but past the size: torch's invariant check, never a read out of
    bounds in the judge."""
    e = copy.deepcopy(sparse)
    sparse_copy(e)["size"] = [1, 1]
    validate_event(e)
    why = merge(e, verdict(e))
    assert why is not None and "a sparse input that is not one" in why


DATA_WRITE = """
import torch
a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
out = a.sigmoid()
out.data.zero_()
out.sum().backward()
"""


def test_an_output_changed_through_data_is_judged_not_unverified():
    """PyTorch's migration guide: `.data` changed `out` behind autograd, so backward used zeros and gave 0.
    The record carries the output as the forward made it; the judge finds it consistent and says disagree
    against sigmoid'(a) = s(1 - s), derived by hand."""
    import math

    (e,), _ = observe(DATA_WRITE)
    assert e["inputs"][0]["grad"] == [0.0, 0.0, 0.0]
    s = [1 / (1 + math.exp(-x)) for x in (1.0, 2.0, 3.0)]
    assert e["inputs"][0]["finite_difference"] == pytest.approx([v * (1 - v) for v in s], rel=1e-6)
    assert checks(e) == {"jtv": "disagree", "finite_difference": "disagree"}
    assert any("not what the recorded forward gives" in n for n in e["notes"])
